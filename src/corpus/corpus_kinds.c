/* corpus_kinds.c — the value kinds: every parameter and result field a template may use, with its
 * JSON type, generator (corpus_values.c), parameter names, descriptions, how it is mentioned, and
 * its JSON Schema. Read corpus.h first.
 *
 * Columns: key, type, generator, generator argument, parameter names ("a|b": a tool variant picks
 * one; the first is the key in results), descriptions, label ("<label> is <value>" and result
 * listings), frames ("in %s|for %s": how a request mentions the value; NULL = the generator says it
 * whole), JSON Schema format, flags (KF_*). Descriptions state the normalization a model must do
 * (ISO dates, E.164, minutes, meters, ISO codes), since that is what makes an argument right. */
#include <stdio.h>
#include <string.h>

#include "corpus/corpus.h"
#include "corpus/corpus_gen.h"
#include "util/check.h"

#define S CT_STRING
#define I CT_INTEGER
#define N CT_NUMBER
#define B CT_BOOLEAN
#define A CT_ARRAY
#define O CT_OBJECT

/* Results: only key, type, generator, argument and label matter. */
#define R(key, type, gen, arg, label) {key, type, gen, arg, key, "", label, NULL, NULL, 0}

static const struct corpus_kind kinds[] = {
    /* ---------------------------------------------------------------- places, people, contact */
    {"city", S, "word", "city", "city|location|city_name", "City name, e.g. Lyon|The city to look up|Name of the city", "city", "in %s|for %s", NULL, 0},
    {"near_city", S, "word", "city", "near|location|city", "City or area to search in|Where to search", "location", "in %s|near %s", NULL, 0},
    {"region", S, "word", "region", "region|area", "Region name|Area to check", "region", "for %s|in %s", NULL, 0},
    {"origin_city", S, "word", "city", "origin|from_city|departure_city", "Departure city|City the trip starts from", "origin", "from %s", NULL, KF_FIRST},
    {"dest_city", S, "word", "city", "destination|to_city|arrival_city", "Arrival city|Destination city", "destination", "to %s", NULL, KF_FIRST},
    {"pickup_city", S, "word", "city", "pickup_location|city|pickup_city", "City where the car is picked up", "pickup city", "in %s|picking it up in %s", NULL, 0},
    {"work_location", S, "word", "city", "location|office|city", "Office location of the role", "location", "based in %s|in %s", NULL, 0},
    {"origin_place", S, "word", "landmark", "origin|from|start", "Starting point: address or place name", "starting point", "from %s", NULL, KF_FIRST},
    {"dest_place", S, "word", "landmark", "destination|to|end", "Destination: address or place name", "destination", "to %s", NULL, KF_FIRST},
    {"place_query", S, "word", "place_query", "query|category|keyword", "What kind of place to look for", "type of place", "a %s|the nearest %s", NULL, KF_FIRST},
    {"person_name", S, "person", NULL, "name|full_name|contact_name", "Full name of the person|The contact's full name", "name", "%s", NULL, KF_FIRST},
    {"passenger_name", S, "person", NULL, "passenger_name|traveler|passenger", "Passenger's full name as on the passport", "passenger", "for %s", NULL, 0},
    {"patient_name", S, "person", NULL, "patient|patient_name", "Full name of the patient", "patient", "for %s", NULL, 0},
    {"employee_name", S, "person", NULL, "name|query|employee_name", "Name (or part of it) of the employee", "name", "%s", NULL, KF_FIRST},
    {"candidate", S, "person", NULL, "candidate|candidate_name", "Candidate's full name", "candidate", "with %s|for %s", NULL, 0},
    {"contact_name", S, "person", NULL, "from|contact|sender_name", "Only messages from this contact", "contact", "from %s", NULL, 0},
    {"viewer_name", S, "person", NULL, "name|visitor|attendee_name", "Name of the person attending", "name", "for %s|under the name %s", NULL, 0},
    {"email", S, "email", NULL, "email", "E-mail address", "e-mail", "%s", "email", 0},
    {"person_email", S, "email", NULL, "email|email_address", "The contact's e-mail address", "e-mail", "(%s)|, email %s", "email", 0},
    {"to_email", S, "email", NULL, "to|recipient|to_address", "Recipient e-mail address", "recipient", "to %s", "email", 0},
    {"from_email", S, "email", NULL, "from|sender|from_address", "Sender e-mail address", "sender", "from %s", "email", 0},
    {"share_email", S, "email", NULL, "email|share_with|recipient", "E-mail address to share with", "recipient", "with %s", "email", 0},
    {"signer_email", S, "email", NULL, "signer_email|signer|recipient", "E-mail address of the signer", "signer", "to %s", "email", 0},
    {"customer_email", S, "email", NULL, "customer_email|requester", "E-mail address of the customer", "customer", "for %s|on behalf of %s", "email", 0},
    {"assignee_email", S, "email", NULL, "assignee|assign_to|owner", "E-mail address of the assignee", "assignee", "and assign it to %s", "email", 0},
    {"assignee", S, "email", NULL, "assignee|assign_to|new_owner", "E-mail address of the new assignee", "assignee", "to %s", "email", 0},
    {"interviewer_email", S, "email", NULL, "interviewer|interviewer_email", "E-mail address of the interviewer", "interviewer", "with interviewer %s|, interviewer %s", "email", 0},
    {"owner_email", S, "email", NULL, "owner|owner_email", "Only deals owned by this user (e-mail)", "owner", "owned by %s", "email", 0},
    {"attendee_emails", A, "array", "email:1:3", "attendees|invitees|guests", "E-mail addresses of the people to invite|List of attendee e-mails", "attendees", "with %s|and invite %s", NULL, 0},
    {"cc_emails", A, "array", "email:1:2", "cc|cc_addresses", "Addresses to copy|CC recipients", "cc", "and cc %s|cc'ing %s", NULL, 0},
    {"team_emails", A, "array", "email:2:3", "members|team", "E-mail addresses of the team members", "team", "with %s", NULL, 0},
    {"phone", S, "phone", NULL, "phone|phone_number|to", "Phone number in E.164 format, e.g. +14155550132|Recipient number, E.164", "phone number", "to %s|to number %s", NULL, 0},
    {"contact_phone", S, "phone", NULL, "phone|phone_number", "Phone number in E.164 format", "phone", ", phone %s|(phone %s)", NULL, 0},
    {"handle", S, "handle", NULL, "handle|username|account", "Username without the leading @|Account handle (no @)", "account", "%s", NULL, KF_FIRST},
    {"handle_to", S, "handle", NULL, "to|recipient|username", "Recipient's username without the @", "recipient", "to %s", NULL, 0},
    {"mention_handle", S, "handle", NULL, "mention|notify_user", "Username to mention, without the @", "mention", "and tag %s|mentioning %s", NULL, 0},
    {"member_handles", A, "array", "handle:2:3", "members|participants", "Usernames to add (without @)", "members", "with %s", NULL, 0},
    {"company", S, "company", NULL, "company|organization|account_name", "Company the contact works for", "company", "from %s|at %s", NULL, 0},
    {"payee", S, "company", NULL, "payee|payee_name|biller", "Who gets paid|Name of the biller", "payee", "to %s", NULL, 0},
    {"party_a", S, "word", "party", "party_a|first_party|discloser", "First party's legal name", "first party", "between %s", NULL, KF_FIRST},
    {"party_b", S, "company", NULL, "party_b|second_party|recipient", "Second party's legal name", "second party", "and %s", NULL, KF_FIRST},
    {"doctor", S, "word", "doctor", "doctor|provider|physician", "Name of the doctor", "doctor", "with %s", NULL, 0},
    {"address_obj", O, "address", NULL, "address|destination", "Postal address; country as an ISO 3166-1 alpha-2 code", "address", "to %s", NULL, 0},
    {"ship_to", O, "address", NULL, "ship_to|recipient_address|to_address", "Destination address; country as an ISO 3166-1 alpha-2 code", "destination", "to %s", NULL, 0},
    {"pickup_address", O, "address", NULL, "pickup_address|from_address", "Where to collect the parcels; country as ISO 3166-1 alpha-2", "pickup address", "from %s|at %s", NULL, 0},
    {"new_address", O, "address", NULL, "new_address|address", "The new delivery address; country as ISO 3166-1 alpha-2", "new address", "to %s", NULL, 0},
    {"delivery_to", O, "address", NULL, "delivery_address|address", "Delivery address; country as ISO 3166-1 alpha-2", "delivery address", "to %s", NULL, 0},
    {"address_text", S, "address_text", NULL, "address|query|location", "Full street address", "address", "%s|for %s", NULL, KF_FIRST},
    {"coords", O, "coords", NULL, "location|coordinates|point", "Latitude and longitude in decimal degrees", "coordinates", NULL, NULL, 0},
    {"origin_country", S, "country", NULL, "origin_country|from_country", "Origin country, ISO 3166-1 alpha-2 code", "origin country", "from %s", NULL, KF_FIRST},
    {"dest_country", S, "country", NULL, "destination_country|to_country", "Destination country, ISO 3166-1 alpha-2 code", "destination country", "to %s", NULL, KF_FIRST},
    {"country_code", S, "country", NULL, "country|country_code", "ISO 3166-1 alpha-2 country code", "country", "for %s|in %s", NULL, 0},
    {"landmark", S, "word", "landmark", "location|place|venue", "Where it takes place", "location", "at %s", NULL, 0},
    {"ingredient", S, "word", "ingredient", "ingredient", "Ingredient", "ingredient", "%s", NULL, 0},
    {"dish", S, "word", "dish", "dish", "Dish name", "dish", "%s", NULL, 0},
    {"column", S, "word", "column", "column", "Column name", "column", "%s", NULL, 0},
    {"warehouse", S, "word", "warehouse", "warehouse|location_code", "Warehouse code, e.g. AMS-1", "warehouse", "at %s|in warehouse %s", NULL, 0},
    {"carrier_name", S, "word", "carrier", "carrier", "Carrier name", "carrier", "with %s|via %s", NULL, 0},
    {"attach_path", S, "path", NULL, "file|path|attachment", "Absolute path of the file to hand in", "file", "(file %s)|with the file %s", NULL, 0},
    {"order_items", A, "order_items", NULL, "items|products|line_items", "Products with quantities", "items", NULL, NULL, 0},

    /* ---------------------------------------------------------------- dates and times */
    {"forecast_date", S, "date", "0:9", "date|day|forecast_date", "Date in YYYY-MM-DD format|Day of the forecast (YYYY-MM-DD)", "date", NULL, "date", 0},
    {"on_date", S, "date", "0:14", "date|day", "Date (YYYY-MM-DD)|The day to look at, YYYY-MM-DD", "date", NULL, "date", 0},
    {"on_date_past", S, "date", "-7:0", "date|day", "Date (YYYY-MM-DD)", "date", NULL, "date", 0},
    {"event_date", S, "date", "0:30", "date|on", "Date of the event (YYYY-MM-DD)", "date", NULL, "date", 0},
    {"match_date_past", S, "date", "-7:-1", "date|match_date", "Date of the match (YYYY-MM-DD)", "date", NULL, "date", 0},
    {"depart_date", S, "date", "1:60", "departure_date|depart_date|date", "Departure date (YYYY-MM-DD)", "departure date", NULL, "date", 0},
    {"return_date", S, "date", "1:14:after", "return_date|inbound_date", "Return date (YYYY-MM-DD); omit for one-way", "return date", "returning %s|coming back %s", "date", 0},
    {"flight_date", S, "date", "0:3", "date|departure_date", "Scheduled departure date (YYYY-MM-DD)", "date", NULL, "date", 0},
    {"checkin_date", S, "date", "1:60", "check_in|checkin_date|arrival_date", "Check-in date (YYYY-MM-DD)", "check-in date", "from %s|checking in %s", "date", 0},
    {"pickup_date", S, "date", "1:60", "pickup_date|start_date", "Pick-up date (YYYY-MM-DD)", "pick-up date", "from %s", "date", 0},
    {"dropoff_date", S, "date", "1:14:after", "return_date|dropoff_date|end_date", "Drop-off date (YYYY-MM-DD)", "return date", "to %s|until %s", "date", 0},
    {"since_date", S, "date", "-60:-1", "from_date|start_date|since", "Start of the period (YYYY-MM-DD)", "start date", "since %s|from %s", "date", 0},
    {"until_date", S, "date", "1:20:after", "to_date|end_date|until", "End of the period (YYYY-MM-DD)", "end date", "until %s|through %s", "date", 0},
    {"modified_after", S, "date", "-90:-1", "modified_after|changed_since", "Only files changed after this date (YYYY-MM-DD)", "date", "modified since %s|changed after %s", "date", 0},
    {"transfer_date", S, "date", "0:30", "date|execution_date|scheduled_date", "Execution date (YYYY-MM-DD); today if omitted", "date", NULL, "date", 0},
    {"pay_date", S, "date", "0:30", "pay_on|payment_date|date", "When to pay (YYYY-MM-DD)", "payment date", NULL, "date", 0},
    {"due_date", S, "date", "0:30", "due_date|due|deadline", "Due date (YYYY-MM-DD)", "due date", "due %s", "date", 0},
    {"due_before", S, "date", "1:30", "due_before|before", "Only tasks due before this date (YYYY-MM-DD)", "date", "due before %s", "date", 0},
    {"deadline", S, "date", "14:120", "deadline|by_date|target_date", "Target date (YYYY-MM-DD)", "deadline", "by %s", "date", 0},
    {"effective_date", S, "date", "0:60", "effective_date|start_date", "Date the agreement takes effect (YYYY-MM-DD)", "effective date", "effective %s|starting %s", "date", 0},
    {"leave_start", S, "date", "3:90", "start_date|from|first_day", "First day of leave (YYYY-MM-DD)", "first day", "from %s|starting %s", "date", 0},
    {"leave_end", S, "date", "0:14:after", "end_date|to|last_day", "Last day of leave (YYYY-MM-DD)", "last day", "to %s|until %s|through %s", "date", 0},
    {"expense_date", S, "date", "-30:0", "date|expense_date|spent_on", "Date of the expense (YYYY-MM-DD)", "date", NULL, "date", 0},
    {"since_symptom", S, "date", "-10:0", "since|onset_date|started", "When the symptom started (YYYY-MM-DD)", "onset", "since %s|starting %s", "date", 0},
    {"preferred_date", S, "date", "2:30", "date|preferred_date", "Preferred date (YYYY-MM-DD)", "date", NULL, "date", 0},
    {"pay_month", S, "month", NULL, "month|period", "Month as YYYY-MM", "month", "for %s", NULL, 0},
    {"season", S, "season", NULL, "season", "Season like 2024-25", "season", "for %s", NULL, 0},
    {"since_year", I, "year", "1990:2024", "since_year|from_year", "Only decisions from this year on", "year", "since %s|from %s on", NULL, 0},
    {"start_datetime", S, "datetime", "0:21", "start|start_time|starts_at", "Start as ISO 8601 local date-time (YYYY-MM-DDTHH:MM:SS)|When it starts, e.g. 2025-01-31T14:00:00", "start time", NULL, "date-time", 0},
    {"new_start", S, "datetime", "1:21", "new_start|new_start_time|start", "New start as ISO 8601 local date-time (YYYY-MM-DDTHH:MM:SS)", "new time", "to %s", "date-time", 0},
    {"remind_at", S, "datetime", "0:14", "remind_at|when|time", "When to remind, ISO 8601 local date-time", "time", NULL, "date-time", 0},
    {"appt_time", S, "datetime", "1:21", "time|datetime|start", "Appointment start, ISO 8601 local date-time", "time", NULL, "date-time", 0},
    {"interview_time", S, "datetime", "1:14", "start|datetime|time", "Interview start, ISO 8601 local date-time", "time", NULL, "date-time", 0},
    {"reservation_time", S, "datetime", "0:14", "datetime|time|reservation_time", "Reservation time, ISO 8601 local date-time", "time", NULL, "date-time", 0},
    {"viewing_time", S, "datetime", "1:14", "datetime|start", "Viewing time, ISO 8601 local date-time", "time", NULL, "date-time", 0},
    {"depart_at", S, "datetime", "0:7", "departure_time|depart_at|leave_at", "When to leave, ISO 8601 local date-time", "departure time", "leaving %s", "date-time", 0},
    {"post_at", S, "datetime", "0:7", "publish_at|schedule_at|post_at", "When to publish, ISO 8601 local date-time; now if omitted", "publish time", "scheduled for %s", "date-time", 0},
    {"daily_time", S, "time", NULL, "time|at|time_of_day", "Time of day, 24-hour HH:MM", "time", "every day at %s|daily at %s", NULL, 0},
    {"trigger_time", S, "time", NULL, "time|trigger_time|at", "Time of day it runs, 24-hour HH:MM", "time", "every day at %s|at %s daily", NULL, 0},
    {"pickup_window", O, "time_window", NULL, "window|pickup_window|time_window", "Pick-up window: start and end as ISO 8601 local date-times", "pick-up window", NULL, NULL, 0},
    {"duration", I, "duration", "15:180", "duration_minutes|duration_min|length_minutes", "Length in minutes|Duration in minutes", "duration", "for %s|lasting %s", NULL, 0},
    {"since_minutes", I, "int", "5:240:minute:minutes", "since_minutes|lookback_minutes|window_minutes", "How many minutes back to look", "time window", "for the past %s|from the last %s", NULL, 0},

    /* ---------------------------------------------------------------- numbers and amounts */
    {"limit", I, "int", "1:20:result:results", "limit|max_results|count", "Maximum number of results|How many results to return", "limit", "(at most %s)|limited to %s", NULL, KF_BOUNDS},
    {"passengers", I, "int", "1:6:passenger:passengers", "passengers|adults|travelers", "Number of passengers", "passengers", "for %s", NULL, KF_BOUNDS},
    {"nights", I, "int", "1:14:night:nights", "nights|num_nights|length_of_stay", "Number of nights", "nights", "for %s", NULL, KF_BOUNDS},
    {"guests", I, "int", "1:6:guest:guests", "guests|num_guests|adults", "Number of guests", "guests", "for %s", NULL, KF_BOUNDS},
    {"party_size", I, "int", "1:12:person:people", "party_size|guests|people", "Number of people", "party size", "for %s", NULL, KF_BOUNDS},
    {"replicas", I, "int", "1:20:replica:replicas", "replicas|instances|count", "Desired number of replicas", "replicas", "to %s", NULL, KF_BOUNDS},
    {"timeout_sec", I, "int", "10:300:second:seconds", "timeout_seconds|timeout", "Timeout in seconds", "timeout", "(timeout %s)|with a timeout of %s", NULL, 0},
    {"min_amount", I, "int", "20:500", "min_amount|minimum_amount", "Only transactions at least this large, in the account currency", "minimum amount", "over %s|of at least %s", NULL, 0},
    {"severity_scale", I, "int", "1:10", "severity|intensity", "Severity from 1 (mild) to 10 (worst)", "severity", "(severity %s out of 10)|, rated %s/10", NULL, KF_BOUNDS},
    {"dose_mg", I, "int", "25:1000:mg:mg", "dose_mg|dose", "Dose in milligrams", "dose", "%s", NULL, 0},
    {"calories", I, "int", "100:1200:calorie:calories", "calories|kcal", "Calories burned", "calories", "burning %s", NULL, 0},
    {"target_value", I, "int", "10:20000", "target|target_value|goal_value", "Target value in the goal's unit", "target", "with a target of %s", NULL, 0},
    {"call_minutes", I, "int", "2:90:minute:minutes", "duration_minutes|minutes", "Call length in minutes", "duration", "lasting %s", NULL, 0},
    {"split_ways", I, "int", "2:8", "split|people|num_people", "How many people share the bill", "people", "split %s ways|for %s people", NULL, 0},
    {"servings", I, "int", "1:12:serving:servings", "servings|portions", "Number of servings", "servings", "to %s|for %s", NULL, KF_BOUNDS},
    {"max_minutes", I, "int", "10:90:minute:minutes", "max_minutes|max_time", "Maximum total time in minutes", "time limit", "that take under %s|in under %s", NULL, 0},
    {"question_count", I, "int", "5:30:question:questions", "num_questions|count|questions", "Number of questions", "questions", "with %s", NULL, KF_BOUNDS},
    {"max_sentences", I, "int", "1:5:sentence:sentences", "max_sentences|length", "Maximum summary length in sentences", "length", "in %s|in at most %s", NULL, KF_BOUNDS},
    {"package_count", I, "int", "1:10:package:packages", "packages|package_count", "Number of parcels", "packages", "for %s", NULL, 0},
    {"ticket_count", I, "int", "1:8:ticket:tickets", "quantity|tickets|count", "Number of tickets", "tickets", "%s", NULL, KF_FIRST | KF_BOUNDS},
    {"shares", I, "int", "1:500:share:shares", "quantity|shares|qty", "Number of shares", "shares", "%s", NULL, KF_FIRST},
    {"bedrooms", I, "int", "1:5:bedroom:bedrooms", "bedrooms|min_bedrooms", "Minimum number of bedrooms", "bedrooms", "with %s", NULL, 0},
    {"floor_area", I, "int", "30:250:m²:m²", "area_m2|square_meters|floor_area", "Floor area in square meters", "floor area", "with %s|of %s", NULL, 0},
    {"min_kw", I, "int", "22:350:kW:kW", "min_power_kw|min_kw", "Minimum charging power in kW", "minimum power", "of at least %s", NULL, 0},
    {"contract_term", I, "int", "6:36:month:months", "term_months|duration_months", "Length of the agreement in months", "term", "for %s", NULL, 0},
    {"term_months", I, "term", NULL, "term_months|months|loan_term", "Loan term in months", "term", "over %s", NULL, KF_FIRST},
    {"brightness", I, "pct", "10:100:w", "brightness|level", "Brightness in percent (0-100)", "brightness", "at %s brightness", NULL, 0},
    {"volume", I, "pct", "0:100:w", "level|volume|percent", "Volume from 0 to 100", "volume", "to %s", NULL, 0},
    {"tip_pct", I, "pct", "10:25", "tip_percent|tip_pct|tip", "Tip in percent", "tip", "with a %s tip|at %s", NULL, KF_FIRST},
    {"annual_rate_pct", N, "decimal", "15:95:10:%", "annual_rate|rate_percent|interest_rate", "Annual interest rate in percent, e.g. 4.5", "rate", "at %s|with %s interest", NULL, KF_FIRST},
    {"radius", I, "meters", "200:5000", "radius_m|radius_meters|radius", "Search radius in meters", "radius", "within %s", NULL, 0},
    {"distance_km", N, "km", "10:500", "distance_km|distance", "Distance in kilometers", "distance", "covering %s|of %s", NULL, 0},
    {"parcel_kg", N, "kg", "100:30000", "weight_kg|weight", "Weight in kilograms", "weight", "weighing %s", NULL, 0},
    {"grams", I, "grams", "50:600", "grams|amount_g|weight_g", "Amount in grams", "amount", "(%s)|per %s", NULL, 0},
    {"body_kg", N, "decimal", "450:1200:10: kg", "weight_kg|weight", "Body weight in kilograms", "weight", "as %s|at %s", NULL, 0},
    {"target_temp", N, "temp", NULL, "temperature|target|setpoint", "Target temperature in the given unit", "temperature", "to %s|at %s", NULL, 0},
    {"temp_unit", S, "temp_unit_linked", NULL, "unit|temperature_unit", "celsius or fahrenheit", "unit", NULL, NULL, KF_LINKED},
    {"conv_value", N, "conv_value", NULL, "value|amount|quantity", "The number to convert", "value", "%s", NULL, KF_FIRST},
    {"from_unit", S, "unit", "from", "from_unit|from", "Unit of the value", "unit", "%s", NULL, KF_FIRST},
    {"to_unit", S, "unit", "to", "to_unit|to", "Unit to convert to", "target unit", "to %s|into %s", NULL, 0},

    /* ---------------------------------------------------------------- money */
    {"amount", N, "money", "10:2000", "amount", "Amount in the given currency", "amount", NULL, NULL, KF_FIRST},
    {"currency", S, "currency_linked", NULL, "currency|currency_code", "ISO 4217 currency code, e.g. EUR", "currency", NULL, NULL, KF_LINKED},
    {"limit_amount", N, "money", "100:5000", "limit|amount|new_limit", "New monthly limit in the given currency", "limit", "to %s", NULL, 0},
    {"expense_amount", N, "money", "5:900", "amount|total", "Amount spent, in the given currency", "amount", "of %s|for %s", NULL, 0},
    {"deal_amount", N, "money", "1000:90000:USD/EUR/GBP", "amount|value|deal_value", "Deal value in US dollars", "value", "worth %s|with a value of %s", NULL, 0},
    {"bill_amount", N, "money", "10:400", "bill_amount|amount|total", "Bill total before tip", "bill", "a %s bill|on %s", NULL, KF_FIRST},
    {"loan_amount", N, "money", "5000:400000:USD/EUR/GBP", "principal|loan_amount|amount", "Amount borrowed", "loan amount", "a %s loan|%s borrowed", NULL, KF_FIRST},
    {"max_price_usd", N, "money", "10:800:USD", "max_price|price_max|budget", "Maximum price in US dollars", "maximum price", "under %s|for less than %s|up to %s", NULL, 0},
    {"max_night_usd", N, "money", "50:400:USD", "max_price|max_price_per_night", "Maximum nightly price in US dollars", "maximum price", "under %s a night|for at most %s per night", NULL, 0},
    {"max_rent_eur", N, "money", "500:4000:EUR", "max_rent|max_price", "Maximum monthly rent in euros", "maximum rent", "under %s a month|for at most %s per month", NULL, 0},
    {"target_price", N, "money", "5:900:USD", "price|target_price", "Price in US dollars", "price", "%s", NULL, KF_FIRST},
    {"from_currency", S, "currency", NULL, "from|from_currency|base", "ISO 4217 code of the source currency", "from", "from %s", NULL, KF_FIRST},
    {"to_currency", S, "currency", NULL, "to|to_currency|target", "ISO 4217 code of the target currency", "to", "to %s|into %s", NULL, 0},

    /* ---------------------------------------------------------------- identifiers */
    {"event_id", S, "id", "evt_????????", "event_id|id", "ID of the event", "event ID", "%s|(ID %s)", NULL, KF_FIRST},
    {"message_id", S, "id", "msg_??????????", "message_id|id|email_id", "ID of the message", "message ID", "%s|(ID %s)", NULL, KF_FIRST},
    {"account_id", S, "id", "ACC-####-####", "account_id|account|account_number", "Account identifier, e.g. ACC-1234-5678", "account", "on account %s|for account %s", NULL, KF_FIRST},
    {"from_account", S, "id", "ACC-####-####", "from_account|source_account", "Account to debit", "source account", "from account %s|from %s", NULL, 0},
    {"to_account", S, "id", "ACC-####-####", "to_account|destination_account", "Account to credit", "destination account", "to account %s|into %s", NULL, 0},
    {"card_last4", S, "id", "####", "card_last4|last4|card_last_four", "Last four digits of the card", "card", "ending in %s|(the one ending %s)", NULL, 0},
    {"flight_number", S, "id", "^^###", "flight_number|flight", "Flight number, e.g. NW482", "flight", "%s", NULL, KF_FIRST},
    {"booking_ref", S, "id", "^#^#^^", "booking_reference|confirmation_code|pnr", "Booking reference (6 characters)", "booking reference", "%s|with reference %s", NULL, KF_FIRST},
    {"order_id", S, "id", "ORD-######", "order_id|order_number", "Order number, e.g. ORD-123456", "order", "%s|(order %s)", NULL, KF_FIRST},
    {"patient_id", S, "id", "PT-######", "patient_id|patient", "Patient identifier", "patient", "for patient %s", NULL, KF_FIRST},
    {"employee_id", S, "id", "E#####", "employee_id|employee", "Employee ID, e.g. E10482", "employee", "for %s|for employee %s", NULL, 0},
    {"deal_id", S, "id", "DL-####", "deal_id|opportunity_id", "Deal identifier", "deal", "%s|deal %s", NULL, KF_FIRST},
    {"contact_id", S, "id", "CT-#####", "contact_id|contact", "Contact identifier", "contact", "for %s|for contact %s", NULL, 0},
    {"event_ref", S, "id", "EV-######", "event_id|event", "Event identifier", "event", "for %s|for event %s", NULL, 0},
    {"event_ref_first", S, "id", "EV-######", "event_id|event", "Event identifier", "event", "%s|event %s", NULL, KF_FIRST},
    {"recipe_id", S, "id", "RCP-####", "recipe_id|id", "Recipe identifier", "recipe", "%s", NULL, KF_FIRST},
    {"portfolio_id", S, "id", "PF-####", "portfolio_id|portfolio", "Portfolio identifier", "portfolio", "%s|(portfolio %s)", NULL, 0},
    {"tracking_number", S, "id", "TRK##########", "tracking_number|tracking_id", "Carrier tracking number", "tracking number", "%s|with tracking number %s", NULL, KF_FIRST},
    {"sku", S, "id", "SKU-^^^-####", "sku|item_code", "Stock keeping unit, e.g. SKU-ABC-1234", "SKU", "%s", NULL, KF_FIRST},
    {"student_id", S, "id", "S#######", "student_id|student", "Student number", "student", "student %s|%s", NULL, KF_FIRST},
    {"course_id", S, "id", "^^^-###", "course_id|course", "Course code, e.g. MTH-204", "course", "in %s|for %s", NULL, 0},
    {"assignment_id", S, "id", "HW-####", "assignment_id|assignment", "Assignment identifier", "assignment", "%s", NULL, KF_FIRST},
    {"contract_id", S, "id", "CTR-####-###", "contract_id|document_id", "Contract identifier", "contract", "%s", NULL, KF_FIRST},
    {"case_id", S, "id", "CV-####-#####", "case_id|case_number", "Court case number", "case", "%s", NULL, KF_FIRST},
    {"post_ref", S, "id", "post_##########", "post_id|id", "ID of the post", "post", "%s", NULL, KF_FIRST},
    {"ticket_id", S, "id", "TCK-#####", "ticket_id|ticket", "Ticket identifier, e.g. TCK-10482", "ticket", "%s|ticket %s", NULL, KF_FIRST},
    {"task_id", S, "id", "TSK-####", "task_id|id", "Task identifier", "task", "%s", NULL, KF_FIRST},
    {"reservation_id", S, "id", "RSV-#####", "reservation_id|booking_id", "Reservation identifier", "reservation", "%s", NULL, KF_FIRST},
    {"listing_id", S, "id", "LST-######", "listing_id|property_id", "Listing identifier", "listing", "for %s|for listing %s", NULL, KF_FIRST},
    {"vehicle_id", S, "word", "vehicle", "vehicle_id|car_id|vin_alias", "Vehicle identifier, e.g. VH-2041", "vehicle", "car %s|vehicle %s", NULL, KF_FIRST},
    {"version_tag", S, "version", NULL, "version|tag|release", "Version tag to deploy, e.g. v2.4.1", "version", "%s|version %s", NULL, KF_FIRST},
    {"target_version", S, "version", NULL, "to_version|target_version|version", "Version to roll back to", "version", "to %s", NULL, 0},
    {"ticker", S, "ticker", NULL, "symbol|ticker", "Ticker symbol, e.g. ACME", "ticker", "%s", NULL, KF_FIRST},
    {"ticker_of", S, "ticker", NULL, "symbol|ticker", "Ticker symbol", "ticker", "of %s", NULL, KF_FIRST},
    {"ticker_for", S, "ticker", NULL, "symbol|ticker", "Ticker symbol to watch", "ticker", "for %s", NULL, KF_FIRST},
    {"pipeline_repo", S, "word", "repo", "repo|repository", "Repository name", "repository", "for %s|in %s", NULL, 0},

    /* ---------------------------------------------------------------- names and texts */
    {"event_title", S, "word", "title", "title|summary|event_title", "Title of the event|Event name shown in the calendar", "title", "called \"%s\"|titled \"%s\"", NULL, KF_FIRST},
    {"reminder_text", S, "word", "reminder", "text|message|reminder_text", "What to be reminded of", "reminder", "to %s", NULL, KF_FIRST},
    {"subject", S, "word", "subject", "subject|title", "Subject line", "subject", "with the subject \"%s\"|titled \"%s\"", NULL, 0},
    {"body", S, "word", "message", "body|text|content", "Body text of the e-mail", "message", "saying \"%s\"|with the message \"%s\"", NULL, KF_LAST},
    {"message_text", S, "word", "message", "message|text|body", "Text of the message", "message", "saying \"%s\"|that says \"%s\"", NULL, KF_LAST},
    {"email_query", S, "word", "doc_query", "query|search|q", "Search terms", "search", "for \"%s\"|mentioning \"%s\"", NULL, 0},
    {"doc_query", S, "word", "doc_query", "query|name_contains|search", "Words in the file name or content", "search", "for \"%s\"|matching \"%s\"", NULL, 0},
    {"product_query", S, "word", "search_query", "query|q|keywords", "What to search for", "search", "matching \"%s\"|for %s", NULL, KF_FIRST},
    {"product_category", S, "word", "product_category", "category|department", "Product category", "category", "in %s|in the %s category", NULL, 0},
    {"return_product", S, "word", "product_single", "item|product", "Name of the item being returned", "item", "for the %s", NULL, 0},
    {"folder_name", S, "word", "mail_folder", "folder|target_folder|label", "Folder to move matching mail into", "folder", "into %s|to the %s folder", NULL, 0},
    {"channel", S, "word", "channel", "channel|channel_name", "Channel name including the #", "channel", "in %s|to %s", NULL, 0},
    {"group_name", S, "word", "group", "name|group_name|title", "Name of the group", "name", "called \"%s\"|named \"%s\"", NULL, 0},
    {"status_message", S, "word", "status_text", "status|status_text|message", "Status text to show", "status", "to \"%s\"|saying \"%s\"", NULL, KF_FIRST},
    {"memo", S, "word", "memo", "memo|reference|description", "Note shown on the statement", "memo", "with the memo \"%s\"|reference \"%s\"", NULL, 0},
    {"last_name", S, "word", "last_name", "last_name|surname", "Passenger's last name", "last name", ", last name %s|under the name %s", NULL, 0},
    {"airline_name", S, "word", "airline", "airline|carrier", "Airline name", "airline", "on %s|for %s", NULL, KF_FIRST},
    {"hotel_name", S, "word", "hotel", "hotel|hotel_name|property", "Name of the hotel", "hotel", "at %s", NULL, 0},
    {"service_name", S, "word", "service", "service|service_name|app", "Service name as deployed, e.g. payments-api", "service", "%s|the %s service", NULL, KF_FIRST},
    {"host", S, "word", "host", "host|hostname|server", "Host to run on", "host", "on %s", NULL, 0},
    {"incident_title", S, "word", "incident", "title|summary", "Short description of the incident", "title", "titled \"%s\"|: \"%s\"", NULL, 0},
    {"repo", S, "word", "repo", "repo|repository", "Repository name", "repository", "for %s|in %s", NULL, 0},
    {"branch", S, "word", "branch", "branch|ref", "Branch name", "branch", "on %s|for branch %s", NULL, 0},
    {"folder_path", S, "word", "folder", "path|folder|folder_path", "Absolute path of the folder", "path", "at %s", NULL, KF_FIRST},
    {"dest_path", S, "word", "folder", "destination|output_dir|path", "Folder to write the export to", "destination", "to %s|into %s", NULL, 0},
    {"file_path", S, "path", NULL, "path|file|file_path", "Absolute path of the file", "file", "%s", NULL, KF_FIRST},
    {"new_path", S, "path", NULL, "new_path|destination|to", "New absolute path", "new path", "to %s", NULL, 0},
    {"file_type", S, "word", "file_type", "file_type|extension|type", "File extension without the dot", "file type", "(only %s files)|of type %s", NULL, 0},
    {"file_paths", A, "array", "file_path:2:3", "paths|files", "Absolute paths of the files", "files", "%s", NULL, KF_FIRST},
    {"archive_name", S, "word", "archive", "archive_name|name|output", "Name of the zip file", "archive", "into %s|as %s", NULL, 0},
    {"song_title", S, "word", "song", "title|song|track", "Song title", "song", "\"%s\"|the song \"%s\"", NULL, KF_FIRST},
    {"artist", S, "word", "artist", "artist|artist_name", "Artist name", "artist", "by %s", NULL, 0},
    {"artist_subject", S, "word", "artist", "artist|name", "Artist name", "artist", "%s", NULL, KF_FIRST},
    {"music_query", S, "word", "song", "query|q", "Words in the title", "search", "matching \"%s\"|called \"%s\"", NULL, 0},
    {"playlist_name", S, "word", "playlist", "name|playlist_name|title", "Name of the playlist", "name", "called \"%s\"|named \"%s\"", NULL, 0},
    {"playlist_target", S, "word", "playlist", "playlist|playlist_name", "Playlist to add to", "playlist", "to my %s playlist|to the \"%s\" playlist", NULL, 0},
    {"description_text", S, "word", "playlist_desc", "description|about", "Short description", "description", "with the description \"%s\"", NULL, 0},
    {"speaker", S, "word", "speaker", "device|speaker|output", "Speaker to play on", "speaker", "on the %s", NULL, 0},
    {"visit_reason", S, "word", "symptom", "reason|notes|visit_reason", "Reason for the visit", "reason", "about %s|for %s", NULL, 0},
    {"symptom", S, "word", "symptom", "symptom|description", "What the person feels", "symptom", ": %s|— %s", NULL, KF_FIRST},
    {"medication", S, "word", "medication", "medication|drug", "Name of the medication", "medication", "for %s", NULL, KF_FIRST},
    {"lab_test", S, "word", "lab_test", "test|test_name", "Which test", "test", "for the %s", NULL, 0},
    {"specialty", S, "word", "specialty", "specialty|speciality", "Medical specialty", "specialty", "for %s|specializing in %s", NULL, 0},
    {"food", S, "word", "food", "food|item|food_name", "Food name", "food", "%s", NULL, KF_FIRST},
    {"department", S, "word", "department", "department|team", "Department name", "department", "in %s|from %s", NULL, 0},
    {"role", S, "word", "role", "role|job_title|position", "Job title", "role", "for the %s role|for the %s position", NULL, 0},
    {"expense_text", S, "word", "expense_desc", "description|note", "What the expense was for", "description", "described as \"%s\"", NULL, 0},
    {"leave_note", S, "word", "leave_note", "note|comment|reason", "Optional note for the approver", "note", "with the note \"%s\"", NULL, 0},
    {"crm_query", S, "company", NULL, "query|search|name", "Name or company to search for", "search", "for %s|matching \"%s\"", NULL, 0},
    {"call_note", S, "word", "note", "note|notes|summary", "Free-text note", "note", "with the note \"%s\"", NULL, 0},
    {"room", S, "word", "room", "room|area|zone", "Room name", "room", "in the %s", NULL, 0},
    {"light_color", S, "word", "color", "color|colour", "Light color name", "color", "in %s", NULL, 0},
    {"door", S, "word", "door", "door|lock|door_name", "Which door", "door", "the %s", NULL, KF_FIRST},
    {"device", S, "word", "device", "device|device_name|name", "Device name as set up in the app", "device", "the %s", NULL, KF_FIRST},
    {"device_list", A, "array", "device:2:3", "devices|device_names", "Devices the scene controls", "devices", "for %s|controlling %s", NULL, 0},
    {"scene_name", S, "word", "scene", "name|scene_name", "Name of the scene", "name", "called \"%s\"", NULL, 0},
    {"math_expression", S, "expr", NULL, "expression|expr|formula", "Arithmetic expression using + - * / and parentheses, e.g. (2 + 3) * 4", "expression", "%s", NULL, KF_FIRST},
    {"equation", S, "equation", NULL, "equation", "Linear equation in x, e.g. 2x + 6 = 14", "equation", "%s", NULL, KF_FIRST},
    {"number_list", A, "numlist", NULL, "values|numbers|data", "The numbers", "numbers", "%s", NULL, KF_FIRST},
    {"source_text", S, "phrase", NULL, "text|source_text|q", "Text to translate", "text", "\"%s\"", NULL, KF_FIRST},
    {"detect_text", S, "phrase", NULL, "text|q", "Text whose language to detect", "text", "\"%s\"", NULL, KF_FIRST},
    {"target_language", S, "lang", "6", "target_language|target|to", "ISO 639-1 code of the target language, e.g. fr", "target language", "into %s|to %s", NULL, 0},
    {"source_language", S, "lang_src", NULL, "source_language|source|from", "ISO 639-1 code of the source language; detected if omitted", "source language", "from %s", NULL, 0},
    {"news_lang", S, "lang", NULL, "language|lang", "ISO 639-1 language code", "language", "in %s", NULL, 0},
    {"dict_word", S, "word_indexed", "word", "word|term", "Word to define", "word", "\"%s\"|the word \"%s\"", NULL, KF_FIRST},
    {"news_topic", S, "word", "topic", "query|topic|q", "Topic to search for", "topic", "about %s|on %s", NULL, 0},
    {"sub_topic", S, "word", "topic", "topic|keyword", "Topic of the newsletter", "topic", "news about %s|updates on %s", NULL, KF_FIRST},
    {"article_url", S, "url", NULL, "url|article_url", "Full URL of the article", "article", "%s", NULL, KF_FIRST},
    {"team", S, "word", "team", "team|team_name", "Team name", "team", "%s", NULL, KF_FIRST},
    {"team_for", S, "word", "team", "team|team_name", "Team name", "team", "for %s", NULL, 0},
    {"league", S, "word", "league", "league|competition", "League name", "league", "for the %s|in the %s", NULL, 0},
    {"player", S, "word", "player", "player|player_name", "Player's full name", "player", "%s", NULL, KF_FIRST},
    {"ingredients", A, "array", "ingredient:2:3", "ingredients|include", "Ingredients the recipe must use", "ingredients", "with %s|using %s", NULL, 0},
    {"grocery_items", A, "array", "ingredient:2:4", "items|names", "Items to add", "items", "%s", NULL, KF_FIRST},
    {"cuisine", S, "word", "cuisine", "cuisine|style", "Cuisine, e.g. Thai", "cuisine", "— %s cuisine|, %s style", NULL, 0},
    {"restaurant", S, "word", "restaurant", "restaurant|restaurant_name|venue", "Name of the restaurant", "restaurant", "at %s", NULL, 0},
    {"restaurant_from", S, "word", "restaurant", "restaurant|restaurant_name", "Restaurant to order from", "restaurant", "from %s", NULL, 0},
    {"restaurant_subject", S, "word", "restaurant", "restaurant|name", "Name of the restaurant", "restaurant", "%s", NULL, KF_FIRST},
    {"dish_items", A, "array", "dish:1:3", "items|dishes", "Dishes to order", "dishes", "%s", NULL, KF_FIRST},
    {"special_request", S, "word", "special_request", "notes|special_request", "Special requests for the restaurant", "note", "— %s, please|(note: %s)", NULL, 0},
    {"event_kind", S, "word", "event_kw", "category|keyword|type", "Kind of event", "kind", "like a %s|— a %s", NULL, 0},
    {"movie", S, "word", "movie", "title|movie", "Movie title", "movie", "\"%s\"", NULL, KF_FIRST},
    {"service_type", S, "word", "service_type", "service|service_type", "Service to book", "service", "for %s", NULL, 0},
    {"legal_query", S, "word", "legal_query", "query|topic", "Legal question or keywords", "topic", "on %s|about %s", NULL, 0},
    {"quiz_topic", S, "word", "scientific", "topic|subject", "Topic of the quiz", "topic", "on %s|about %s", NULL, 0},
    {"course_subject", S, "word", "course_subject", "subject|topic|query", "Subject of the course", "subject", "on %s|about %s", NULL, 0},
    {"submission_comment", S, "word", "submission_comment", "comment|note", "Note to the teacher", "comment", "with the comment \"%s\"", NULL, 0},
    {"post_body", S, "word", "post_text", "text|content|body", "Text of the post", "text", "\"%s\"|saying \"%s\"", NULL, KF_FIRST},
    {"sql_code", S, "code", "sql", "query|sql", "SQL statement to run", "query", NULL, NULL, KF_LAST},
    {"shell_code", S, "code", "shell", "command|cmd", "Shell command to run", "command", NULL, NULL, KF_LAST},
    {"python_code", S, "code", "python", "code|source|snippet", "Source code to check", "code", NULL, NULL, KF_LAST},
    {"database", S, "word", "database", "database|db", "Database name", "database", "on the %s database|against %s", NULL, 0},
    {"database_subject", S, "word", "database", "database|db", "Database name", "database", "the %s database", NULL, KF_FIRST},
    {"db_schema", S, "word", "schema", "schema", "Schema name", "schema", "in the %s schema", NULL, 0},
    {"table", S, "word", "table", "table|table_name", "Table name", "table", "the %s table|table %s", NULL, KF_FIRST},
    {"table_on", S, "word", "table", "table|table_name", "Table name", "table", "on the %s table|on %s", NULL, 0},
    {"columns", A, "array", "column:1:2", "columns|column_names", "Columns to index", "columns", "(%s)|for columns %s", NULL, 0},
    {"index_name", S, "word", "index_name", "name|index_name", "Name of the index", "name", "named %s", NULL, 0},
    {"backup_label", S, "word", "backup_label", "label|name|tag", "Label for the backup", "label", "labelled \"%s\"|as \"%s\"", NULL, 0},
    {"ticket_subject", S, "word", "ticket_subject", "subject|title", "Short summary of the problem", "subject", "titled \"%s\"|about \"%s\"", NULL, 0},
    {"ticket_body", S, "word", "ticket_body", "description|body|details", "Full description of the problem", "description", "saying: \"%s\"|with the description \"%s\"", NULL, KF_LAST},
    {"comment", S, "word", "note", "text|comment|body", "Comment text", "comment", "saying \"%s\"", NULL, KF_LAST},
    {"kb_query", S, "word", "kb_query", "query|q", "Search terms", "search", "for %s|about %s", NULL, 0},
    {"resolution", S, "word", "resolution", "resolution|note", "How the issue was resolved", "resolution", "with the note \"%s\"|noting \"%s\"", NULL, 0},
    {"task_title", S, "word", "task", "title|name|task", "What needs doing", "title", "\"%s\"|called \"%s\"", NULL, KF_FIRST},
    {"project", S, "word", "project", "project|project_name", "Project name", "project", "in the %s project|for %s", NULL, 0},
    {"project_name", S, "word", "project", "name|project_name", "Name of the project", "name", "called \"%s\"", NULL, KF_FIRST},
    {"party", S, "word", "party", "name", "Party name", "party", "%s", NULL, 0},
    {"product_name", S, "word", "product_single", "product|name", "Product name", "product", "%s", NULL, 0},

    /* ---------------------------------------------------------------- enums and flags */
    {"units", S, "enum", "metric=in Celsius/in metric units;imperial=in Fahrenheit/in imperial units", "units|unit_system", "Unit system for the result|metric or imperial", "units", NULL, NULL, 0},
    {"alert_severity", S, "enum", "minor=including minor ones;moderate=moderate or worse;severe=severe ones only/only severe ones;extreme=only extreme ones", "min_severity|severity", "Lowest severity to include", "minimum severity", NULL, NULL, 0},
    {"calendar_name", S, "enum", "work=on my work calendar;personal=on my personal calendar;family=on the family calendar", "calendar|calendar_id", "Which calendar", "calendar", NULL, NULL, 0},
    {"notify_attendees", B, "bool", "and let the attendees know/and notify everyone;without notifying anyone/but don't send notifications", "notify|notify_attendees|send_updates", "Whether to e-mail the attendees", "notify", NULL, NULL, KF_NOLABEL},
    {"unread_only", B, "bool", "that are unread/only unread ones;read or unread/including read ones", "unread_only|only_unread", "Only unread messages", "unread only", NULL, NULL, KF_NOLABEL},
    {"mark_read", B, "bool", "and mark them as read;but leave them unread", "mark_read|mark_as_read", "Mark filed mail as read", "mark read", NULL, NULL, KF_NOLABEL},
    {"reply_all", B, "bool", "to everyone on the thread/and reply all;just to the sender/only to the sender", "reply_all", "Reply to all recipients", "reply all", NULL, NULL, KF_NOLABEL},
    {"presence", S, "enum", "available=and mark me as available;busy=and mark me as busy/and set me to do not disturb;away=and mark me as away", "presence|availability", "Availability to show", "availability", NULL, NULL, 0},
    {"freeze_reason", S, "enum", "lost=because I lost it;stolen=because it was stolen;suspicious_activity=because I see charges I don't recognize;travel=while I'm travelling", "reason", "Why the card is frozen", "reason", NULL, NULL, 0},
    {"cabin_class", S, "enum", "economy=in economy/in coach;premium_economy=in premium economy;business=in business class;first=in first class", "cabin|cabin_class|class", "Cabin class", "cabin", NULL, NULL, 0},
    {"seat_pref", S, "enum", "window=with a window seat;aisle=with an aisle seat/on the aisle;middle=in a middle seat", "seat|seat_preference", "Seat preference", "seat", NULL, NULL, 0},
    {"room_type", S, "enum", "single=a single room;double=a double room;twin=a twin room;suite=a suite", "room_type|room", "Type of room", "room type", NULL, NULL, 0},
    {"sort_by", S, "enum", "price_asc=cheapest first/sorted by lowest price;price_desc=most expensive first;rating=best rated first/sorted by rating;newest=newest first", "sort|sort_by|order_by", "Sort order", "sort order", NULL, NULL, 0},
    {"cancel_reason", S, "enum", "changed_mind=because I changed my mind;found_cheaper=because I found it cheaper elsewhere;too_slow=since delivery takes too long;ordered_by_mistake=because I ordered it by mistake", "reason|cancel_reason", "Why the order is cancelled", "reason", NULL, NULL, 0},
    {"return_reason", S, "enum", "damaged=because it arrived damaged;wrong_item=because it's the wrong item;doesnt_fit=because it doesn't fit;not_as_described=since it's not as described", "reason|return_reason", "Why the item is returned", "reason", NULL, NULL, 0},
    {"order_status_filter", S, "enum", "pending=that are still pending;shipped=that have shipped;delivered=that were delivered;cancelled=that were cancelled", "status|status_filter", "Only orders in this state", "status", NULL, NULL, 0},
    {"environment", S, "enum", "production=in production/on prod;staging=in staging/on staging;development=in dev/in the dev environment", "environment|env", "Target environment", "environment", NULL, NULL, 0},
    {"target_env", S, "enum", "production=to production/to prod;staging=to staging;development=to dev", "environment|env|target", "Environment to deploy to", "environment", NULL, NULL, 0},
    {"dry_run", B, "bool", "as a dry run/in dry-run mode;for real", "dry_run", "Only show what would change", "dry run", NULL, NULL, KF_NOLABEL},
    {"log_level", S, "enum", "debug=including debug lines;info=info and above;warning=warnings and above;error=errors only/only errors", "level|min_level|log_level", "Lowest log level to include", "log level", NULL, NULL, 0},
    {"incident_severity", S, "enum", "sev1=as SEV1/as critical;sev2=as SEV2;sev3=as SEV3/as low severity", "severity|sev", "Incident severity", "severity", NULL, NULL, 0},
    {"permanent", B, "bool", "permanently/for good;to the trash/but keep it in the trash", "permanent|hard_delete", "Skip the trash", "permanent", NULL, NULL, KF_NOLABEL},
    {"permission", S, "enum", "view=with view-only access/read-only;comment=with comment access;edit=with edit access/with edit rights", "role|permission|access", "Access level", "access", NULL, NULL, 0},
    {"notify_user", B, "bool", "and notify them/and send them a note;without notifying them/quietly", "notify|send_notification", "E-mail the person about the share", "notify", NULL, NULL, KF_NOLABEL},
    {"travel_mode", S, "enum", "driving=by car/driving;walking=on foot/walking;transit=by public transport/by train or bus;cycling=by bike/cycling", "mode|travel_mode|profile", "How to travel", "travel mode", NULL, NULL, 0},
    {"avoid_tolls", B, "bool", "avoiding tolls/with no toll roads;even if it uses toll roads", "avoid_tolls", "Avoid toll roads", "avoid tolls", NULL, NULL, KF_NOLABEL},
    {"open_now", B, "bool", "that's open now/open right now;even if it's closed now", "open_now", "Only places open now", "open now", NULL, NULL, KF_NOLABEL},
    {"shuffle", B, "bool", "on shuffle/shuffled;in order/without shuffle", "shuffle", "Shuffle play", "shuffle", NULL, NULL, KF_NOLABEL},
    {"public", B, "bool", "and make it public/as a public playlist;and keep it private/as a private playlist", "public|is_public", "Visible to everyone", "public", NULL, NULL, KF_NOLABEL},
    {"workout_type", S, "enum", "run=a run;ride=a bike ride;swim=a swim;strength=a strength session;yoga=a yoga session;hike=a hike", "type|activity|workout_type", "Kind of workout", "workout type", NULL, NULL, KF_FIRST},
    {"goal_type", S, "enum", "steps=a daily step goal;weight=a weight goal;distance=a running distance goal;active_minutes=an active-minutes goal", "goal_type|metric|type", "What the goal measures", "goal type", NULL, NULL, KF_FIRST},
    {"meal_type", S, "enum", "breakfast=for breakfast;lunch=for lunch;dinner=for dinner;snack=as a snack", "meal|meal_type", "Which meal", "meal", NULL, NULL, 0},
    {"leave_type", S, "enum", "vacation=as vacation;sick=as sick leave;personal=as personal leave;parental=as parental leave", "type|leave_type", "Kind of leave", "leave type", NULL, NULL, 0},
    {"expense_category", S, "enum", "travel=under travel;meals=under meals;office_supplies=under office supplies;software=under software;training=under training", "category|expense_category", "Expense category", "category", NULL, NULL, 0},
    {"remote_ok", B, "bool", "open to remote/remote-friendly;on-site only", "remote|remote_ok", "Whether the role can be remote", "remote", NULL, NULL, KF_NOLABEL},
    {"deal_stage", S, "enum", "prospecting=to prospecting;qualified=to qualified;proposal=to proposal/to the proposal stage;negotiation=to negotiation;closed_won=to closed won;closed_lost=to closed lost", "stage|deal_stage", "Pipeline stage", "stage", NULL, NULL, 0},
    {"deal_stage_filter", S, "enum", "prospecting=in prospecting;proposal=at the proposal stage;negotiation=in negotiation;closed_won=that were won", "stage|deal_stage", "Only deals in this stage", "stage", NULL, NULL, 0},
    {"cleaning_mode", S, "enum", "quiet=in quiet mode;standard=in standard mode;deep=with a deep clean/in deep-clean mode", "mode|cleaning_mode", "Cleaning mode", "mode", NULL, NULL, 0},
    {"news_category", S, "enum", "business=in business/business;technology=tech/in technology;sports=sports;science=science;health=health;entertainment=entertainment", "category|section", "News section", "category", NULL, NULL, 0},
    {"frequency", S, "enum", "daily=daily/every day;weekly=weekly/once a week;monthly=monthly/once a month", "frequency|cadence", "How often to send updates", "frequency", NULL, NULL, 0},
    {"diet", S, "enum", "vegetarian=that are vegetarian;vegan=that are vegan;gluten_free=that are gluten-free;keto=that are keto", "diet|dietary_restriction", "Dietary restriction", "diet", NULL, NULL, 0},
    {"exchange", S, "enum", "NYSE=on the NYSE;NASDAQ=on NASDAQ;LSE=on the LSE;XETRA=on Xetra", "exchange|market", "Stock exchange", "exchange", NULL, NULL, 0},
    {"interval", S, "enum", "1d=day by day/daily;1wk=week by week/weekly;1mo=month by month/monthly", "interval|granularity", "Bar interval", "interval", NULL, NULL, 0},
    {"order_side", S, "enum", "buy=to buy;sell=to sell", "side|action", "buy or sell", "side", NULL, NULL, KF_FIRST},
    {"order_type", S, "enum", "market=at market/as a market order;limit=as a limit order", "order_type|type", "Order type", "order type", NULL, NULL, 0},
    {"alert_direction", S, "enum", "above=when it rises above/if it goes above;below=when it drops below/if it falls below", "direction|condition", "Trigger when the price goes above or below", "direction", NULL, NULL, KF_FIRST},
    {"service_level", S, "enum", "standard=with standard shipping;express=by express;overnight=overnight/next-day", "service|service_level|speed", "Shipping speed", "service level", NULL, NULL, 0},
    {"dimensions", O, "dimensions", NULL, "dimensions|size", "Parcel size in centimeters", "dimensions", "(%s)|measuring %s", NULL, 0},
    {"course_level", S, "enum", "beginner=for beginners;intermediate=at intermediate level;advanced=at an advanced level", "level", "Course level", "level", NULL, NULL, 0},
    {"difficulty", S, "enum", "easy=(easy)/on the easy side;medium=(medium difficulty);hard=(hard)/that's challenging", "difficulty|level", "Difficulty", "difficulty", NULL, NULL, 0},
    {"jurisdiction", S, "enum", "us_ny=in New York;us_ca=in California;uk=in England and Wales;fr=in France;de=in Germany", "jurisdiction|court_system", "Jurisdiction", "jurisdiction", NULL, NULL, 0},
    {"governing_law", S, "enum", "us_ny=under New York law;us_ca=under California law;uk=under English law;fr=under French law;de=under German law", "governing_law|law", "Governing law", "governing law", NULL, NULL, 0},
    {"focus_area", S, "enum", "liability=focusing on liability;termination=focusing on termination clauses;payment_terms=with a focus on payment terms;confidentiality=focusing on confidentiality", "focus|focus_area", "What to look at closely", "focus", NULL, NULL, 0},
    {"platform", S, "enum", "mastodon=on Mastodon;bluesky=on Bluesky;linkedin=on LinkedIn", "platform|network", "Social network", "platform", NULL, NULL, 0},
    {"read_only", B, "bool", "in read-only mode/read-only;with writes allowed", "read_only", "Refuse statements that modify data", "read only", NULL, NULL, KF_NOLABEL},
    {"export_format", S, "enum", "csv=as CSV/to CSV;json=as JSON;parquet=as Parquet;xlsx=as an Excel file", "format|export_format", "Output format", "format", NULL, NULL, 0},
    {"unique", B, "bool", "as a unique index;as a non-unique index", "unique", "Enforce uniqueness", "unique", NULL, NULL, KF_NOLABEL},
    {"priority", S, "enum", "low=with low priority/as low priority;normal=with normal priority;high=with high priority/as high priority;urgent=as urgent", "priority", "Priority", "priority", NULL, NULL, 0},
    {"ticket_status", S, "enum", "open=and reopen it;pending=and set it to pending;resolved=and mark it resolved;closed=and close it", "status", "New status", "status", NULL, NULL, 0},
    {"internal", B, "bool", "as an internal note/internal only;as a public reply/visible to the customer", "internal|private", "Hide the comment from the customer", "internal", NULL, NULL, KF_NOLABEL},
    {"task_status", S, "enum", "open=that are open;in_progress=that are in progress;done=that are done/that are completed", "status", "Only tasks in this state", "status", NULL, NULL, 0},
    {"price_level", S, "enum", "cheap=that's cheap/that's inexpensive;moderate=that's mid-range;expensive=that's upscale/that's fancy", "price|price_level", "Price level", "price level", NULL, NULL, 0},
    {"seat_section", S, "enum", "floor=on the floor/standing;balcony=in the balcony;front_rows=in the front rows;vip=in the VIP section", "section|seat_section", "Seating section", "section", NULL, NULL, 0},
    {"connector", S, "enum", "ccs=with CCS connectors;chademo=with CHAdeMO;type2=with Type 2 plugs;nacs=with NACS connectors", "connector|plug_type", "Connector type", "connector", NULL, NULL, 0},
    {"car_class", S, "enum", "economy=in the economy class;compact=a compact one;suv=an SUV;van=a van;luxury=something luxurious", "car_class|category", "Car category", "car class", NULL, NULL, 0},
    {"listing_type", S, "enum", "rent=to rent/for rent;sale=to buy/for sale", "listing_type|type", "Rent or sale", "type", NULL, NULL, 0},

    /* ---------------------------------------------------------------- results */
    R("condition", S, "word", "condition", "conditions"),
    R("temp_high", I, "measure", "-5:35:°C", "high"),
    R("temp_low", I, "measure", "-10:22:°C", "low"),
    R("precip_chance", I, "measure", "0:100:%", "chance of rain"),
    R("temperature", I, "measure", "-8:36:°C", "temperature"),
    R("humidity", I, "measure", "20:95:%", "humidity"),
    R("wind_speed", I, "measure", "0:60: km/h", "wind"),
    R("aqi", I, "measure", "8:180:", "air quality index"),
    R("aqi_category", S, "aqi_category", NULL, "category"),
    R("main_pollutant", S, "word", "pollutant", "main pollutant"),
    R("uv_index", I, "measure", "0:11:", "UV index"),
    R("uv_risk", S, "uv_risk", NULL, "risk"),
    R("alert_title", S, "word", "alert", "alert"),
    R("alert_level", S, "word", "alert_level", "severity"),
    R("alert_until", S, "datetime_result", "0:2", "until"),
    R("sunrise", S, "time_result", "5:7", "sunrise"),
    R("sunset", S, "time_result", "17:21", "sunset"),
    R("pollen_level", S, "word", "pollen_level", "level"),
    R("pollen_type", S, "word", "pollen_type", "main pollen"),
    R("start_time", S, "datetime_result", "0:0", "starts"),
    R("slot_start", S, "time_result", "8:11", "from"),
    R("slot_end", S, "time_result", "13:17", "to"),
    R("reminder_id", S, "id", "rem_????????", "reminder ID"),
    R("filter_id", S, "id", "flt_??????", "filter ID"),
    R("group_id", S, "id", "grp_????????", "group ID"),
    R("received_at", S, "datetime_result", "-3:0", "received"),
    R("body_preview", S, "word", "message", "preview"),
    R("from_name", S, "person", NULL, "from"),
    R("message_preview", S, "word", "message", "message"),
    R("balance", N, "money_result", "100:9000", "balance"),
    R("available_balance", N, "money_result", "50:8000", "available"),
    R("as_of", S, "datetime_result", "0:0", "as of"),
    R("txn_description", S, "word", "memo", "description"),
    R("txn_amount", N, "money_result", "3:400", "amount"),
    R("txn_date", S, "date_result", "-20:-1", "date"),
    R("transfer_id", S, "id", "TRF-########", "transfer ID"),
    R("payment_id", S, "id", "PAY-########", "payment ID"),
    R("card_label", S, "word", "card_kind", "card"),
    R("card_last4_r", S, "id", "####", "ending"),
    R("card_state", S, "word", "card_state", "status"),
    R("airline", S, "word", "airline", "airline"),
    R("depart_time", S, "datetime_result", "1:30", "departs"),
    R("price", N, "money_result", "40:900", "price"),
    R("total_price", N, "money_result", "80:2400", "total"),
    R("flight_state", S, "word", "flight_state", "status"),
    R("gate", S, "id", "^##", "gate"),
    R("refund", N, "money_result", "20:900", "refund"),
    R("boarding_pass_id", S, "id", "BP-########", "boarding pass"),
    R("seat", S, "id", "##^", "seat"),
    R("carry_on", S, "word", "carry_on", "carry-on"),
    R("checked_bags", S, "word", "checked_bags", "checked bags"),
    R("price_per_night", N, "money_result", "60:380", "per night"),
    R("rating", N, "decimal", "30:50:10:/5", "rating"),
    R("amenities", S, "word", "amenity", "amenities"),
    R("check_in_time", S, "time_result", "14:16", "check-in from"),
    R("product_name_r", S, "word", "product_single", "product"),
    R("cart_total", N, "money_result", "10:400", "cart total"),
    R("item_count", I, "measure", "1:9:", "items"),
    R("order_state", S, "word", "order_state", "status"),
    R("delivery_date", S, "date_result", "1:7", "expected delivery"),
    R("carrier", S, "word", "carrier", "carrier"),
    R("return_id", S, "id", "RMA-######", "return ID"),
    R("order_total", N, "money_result", "10:600", "total"),
    R("deployment_id", S, "id", "dep-???????", "deployment ID"),
    R("log_time", S, "time_result", "0:23", "time"),
    R("log_level_r", S, "word", "log_level_word", "level"),
    R("log_message", S, "word", "log_line", "message"),
    R("exit_code", I, "measure", "0:0:", "exit code"),
    R("stdout", S, "word", "stdout_line", "output"),
    R("incident_id", S, "id", "INC-####", "incident ID"),
    R("build_state", S, "word", "build_state", "status"),
    R("build_duration", S, "word", "build_time", "duration"),
    R("failed_step", S, "word", "step", "last step"),
    R("issue_count", I, "measure", "1:4:", "issues"),
    R("issue_summary", S, "word", "issue", "main issue"),
    R("file_name_r", S, "word", "file_name", "name"),
    R("file_path_r", S, "path", NULL, "path"),
    R("size_r", S, "word", "file_size", "size"),
    R("modified_at", S, "datetime_result", "-30:-1", "last modified"),
    R("owner_r", S, "email", NULL, "owner"),
    R("share_link", S, "id", "https://files.example.com/s/??????????", "link"),
    R("archive_path", S, "word", "archive", "archive"),
    R("route_distance", S, "word", "route_km", "distance"),
    R("route_duration", S, "word", "route_time", "travel time"),
    R("route_summary", S, "word", "route", "route"),
    R("place_name", S, "word", "place_name", "place"),
    R("place_address", S, "address_text", NULL, "address"),
    R("lat", N, "coord_result", "a", "latitude"),
    R("lon", N, "coord_result", "o", "longitude"),
    R("address_r", S, "address_text", NULL, "address"),
    R("song_title_r", S, "word", "song", "title"),
    R("artist_r", S, "word", "artist", "artist"),
    R("duration_r", S, "word", "song_length", "length"),
    R("playlist_id", S, "id", "pl_??????????", "playlist ID"),
    R("genre", S, "word", "genre", "genre"),
    R("top_song", S, "word", "top_song", "best-known song"),
    R("monthly_listeners", I, "measure", "12000:2400000:", "monthly listeners"),
    R("appointment_id", S, "id", "APT-######", "appointment ID"),
    R("medication_r", S, "word", "medication", "medication"),
    R("dose_r", S, "word", "dose_text", "dose"),
    R("frequency_r", S, "word", "pharma_freq", "frequency"),
    R("entry_id", S, "id", "log_????????", "entry ID"),
    R("result_value", S, "word", "lab_value", "result"),
    R("reference_range", S, "word", "lab_range", "reference range"),
    R("result_flag", S, "word", "lab_flag", "flag"),
    R("steps", I, "measure", "1200:18000:", "steps"),
    R("active_minutes", I, "measure", "5:140: min", "active time"),
    R("calories_burned", I, "measure", "1500:3200: kcal", "calories burned"),
    R("goal_id", S, "id", "goal_??????", "goal ID"),
    R("calories_r", I, "measure", "40:700: kcal", "calories"),
    R("workout_r", S, "word", "workout", "workout"),
    R("date_r", S, "date_result", "-14:-1", "date"),
    R("request_id", S, "id", "REQ-######", "request ID"),
    R("days_remaining", N, "decimal", "0:30:1: days", "days left"),
    R("days_used", N, "decimal", "0:20:1: days", "days used"),
    R("person_r", S, "person", NULL, "name"),
    R("department_r", S, "word", "department", "department"),
    R("email_r", S, "email", NULL, "e-mail"),
    R("expense_id", S, "id", "EXP-######", "expense ID"),
    R("net_pay", N, "money_result", "1800:6500", "net pay"),
    R("gross_pay", N, "money_result", "2600:9500", "gross pay"),
    R("pay_day", S, "date_result", "-20:-1", "paid on"),
    R("interview_id", S, "id", "INT-#####", "interview ID"),
    R("posting_id", S, "id", "JOB-####", "posting ID"),
    R("contact_id_r", S, "id", "CT-#####", "contact ID"),
    R("company_r", S, "company", NULL, "company"),
    R("activity_id", S, "id", "ACT-######", "activity ID"),
    R("deal_name", S, "word", "deal", "deal"),
    R("deal_value", N, "money_result", "2000:90000", "value"),
    R("deal_stage_r", S, "word", "stage_name", "stage"),
    R("crm_task_id", S, "id", "TSK-####", "task ID"),
    R("current_temp", N, "decimal", "160:240:10:°", "current temperature"),
    R("device_state", S, "word", "device_state", "state"),
    R("battery_level", I, "measure", "5:100:%", "battery"),
    R("last_seen", S, "datetime_result", "0:0", "last seen"),
    R("scene_id", S, "id", "scn_??????", "scene ID"),
    R("calc_result", N, "computed", "expr", "result"),
    R("conv_result", N, "computed", "convert", "result"),
    R("solution", S, "computed", "solve", "solution"),
    R("mean", N, "computed", "mean", "mean"),
    R("median", N, "computed", "median", "median"),
    R("range", N, "computed", "range", "range"),
    R("total_with_tip", N, "computed", "tip", "total with tip"),
    R("per_person", N, "computed", "per_person", "per person"),
    R("monthly_payment", N, "computed", "loan", "monthly payment"),
    R("translated_text", S, "translation", NULL, "translation"),
    R("detected_language", S, "detected", NULL, "language"),
    R("confidence", N, "decimal", "80:99:100:", "confidence"),
    R("definition", S, "definition", NULL, "definition"),
    R("part_of_speech", S, "word", "pos", "part of speech"),
    R("language_r", S, "word", "language_code", "language"),
    R("headline", S, "word", "headline", "headline"),
    R("source", S, "word", "news_source", "source"),
    R("published_at", S, "datetime_result", "-2:0", "published"),
    R("subscription_id", S, "id", "sub_????????", "subscription ID"),
    R("summary_text", S, "summary", NULL, "summary"),
    R("opponent", S, "word", "team", "opponent"),
    R("final_score", S, "word", "score", "final score"),
    R("match_status", S, "word", "match_status", "status"),
    R("leader", S, "word", "team", "leader"),
    R("points_r", I, "measure", "20:80:", "points"),
    R("games_played", I, "measure", "10:34:", "games played"),
    R("kickoff", S, "datetime_result", "1:21", "kick-off"),
    R("venue", S, "word", "venue", "venue"),
    R("goals", I, "measure", "0:25:", "goals"),
    R("assists", I, "measure", "0:15:", "assists"),
    R("recipe_name_r", S, "word", "dish", "recipe"),
    R("prep_minutes", I, "measure", "10:90: min", "time"),
    R("recipe_id_r", S, "id", "RCP-####", "recipe ID"),
    R("servings_r", I, "measure", "2:6:", "servings"),
    R("scaled_servings", S, "computed", "scaled", "now makes"),
    R("protein_g", N, "decimal", "1:300:10: g", "protein"),
    R("carbs_g", N, "decimal", "1:900:10: g", "carbohydrates"),
    R("shopping_status", S, "fixed", "added", "status"),
    R("quote_price", N, "money_result", "5:900", "price"),
    R("change_pct", N, "decimal", "-500:500:100:%", "change today"),
    R("close_price", N, "money_result", "5:900", "close"),
    R("volume_r", I, "measure", "10000:9000000:", "volume"),
    R("fx_rate", N, "computed", "fx_rate", "rate"),
    R("converted_amount", N, "computed", "fx_amount", "converted amount"),
    R("order_ref", S, "id", "ORD-########", "order reference"),
    R("total_value", N, "money_result", "1000:250000", "total value"),
    R("day_change", N, "decimal", "-300:300:100:%", "change today"),
    R("top_holding", S, "ticker", NULL, "largest holding"),
    R("alert_id", S, "id", "alrt_??????", "alert ID"),
    R("shipment_state", S, "word", "shipment_state", "status"),
    R("location_r", S, "word", "city", "last seen in"),
    R("eta_date", S, "date_result", "0:5", "expected"),
    R("tracking_number_r", S, "id", "TRK##########", "tracking number"),
    R("label_url", S, "id", "https://labels.example.com/??????????.pdf", "label"),
    R("shipping_cost", N, "money_result", "5:180", "cost"),
    R("transit_days", I, "measure", "1:9: days", "transit time"),
    R("pickup_id", S, "id", "PU-######", "pickup ID"),
    R("on_hand", I, "measure", "0:900: units", "on hand"),
    R("reserved_r", I, "measure", "0:120: units", "reserved"),
    R("restock_date", S, "date_result", "3:30", "next restock"),
    R("course_title", S, "word", "course_subject", "course"),
    R("course_id_r", S, "id", "^^^-###", "code"),
    R("weeks", I, "measure", "4:14: weeks", "length"),
    R("enrollment_id", S, "id", "ENR-######", "enrollment ID"),
    R("grade_letter", S, "word", "grade", "grade"),
    R("grade_score", I, "measure", "55:100:%", "score"),
    R("submission_id", S, "id", "SUB-######", "submission ID"),
    R("quiz_id", S, "id", "QZ-#####", "quiz ID"),
    R("assignment_title", S, "word", "assignment", "assignment"),
    R("due_at", S, "datetime_result", "1:21", "due"),
    R("case_name_r", S, "word", "case_name", "case"),
    R("decided_year", I, "year", "1995:2024", "decided"),
    R("court_r", S, "word", "court", "court"),
    R("document_id", S, "id", "DOC-######", "document ID"),
    R("signature_state", S, "word", "signature_state", "status"),
    R("signed_by", S, "email", NULL, "signed by"),
    R("pending_signers", I, "measure", "0:2:", "still to sign"),
    R("risk_level", S, "word", "risk", "risk"),
    R("finding", S, "word", "finding", "main finding"),
    R("deadline_date", S, "date_result", "3:60", "deadline"),
    R("deadline_type", S, "word", "deadline_type", "for"),
    R("post_id", S, "id", "post_##########", "post ID"),
    R("followers", I, "measure", "80:250000:", "followers"),
    R("following", I, "measure", "10:3000:", "following"),
    R("from_handle", S, "handle", NULL, "from"),
    R("mention_text_r", S, "word", "post_text", "text"),
    R("mentioned_at", S, "datetime_result", "-3:0", "at"),
    R("row_count", I, "measure", "0:5000:", "rows"),
    R("rows_preview", S, "word", "rows_preview", "first rows"),
    R("table_name_r", S, "word", "table", "table"),
    R("row_estimate", I, "measure", "100:9000000:", "rows"),
    R("column_count", I, "measure", "3:40:", "columns"),
    R("primary_key_r", S, "word", "column", "primary key"),
    R("backup_id", S, "id", "bkp-????????", "backup ID"),
    R("backup_size", S, "word", "file_size", "size"),
    R("export_path", S, "word", "export_file", "file"),
    R("index_name_r", S, "word", "index_name", "index"),
    R("ticket_id_r", S, "id", "TCK-#####", "ticket ID"),
    R("ticket_state", S, "word", "ticket_state", "status"),
    R("assignee_r", S, "email", NULL, "assignee"),
    R("last_update", S, "datetime_result", "-2:0", "last update"),
    R("comment_id", S, "id", "cmt_????????", "comment ID"),
    R("article_title", S, "word", "kb_title", "article"),
    R("article_url_r", S, "id", "https://help.example.com/articles/######", "link"),
    R("task_id_r", S, "id", "TSK-####", "task ID"),
    R("task_title_r", S, "word", "task", "task"),
    R("due_r", S, "date_result", "0:14", "due"),
    R("project_id", S, "id", "PRJ-###", "project ID"),
    R("restaurant_r", S, "word", "restaurant", "restaurant"),
    R("reservation_id_r", S, "id", "RSV-#####", "reservation ID"),
    R("popular_dish", S, "word", "dish", "most popular dish"),
    R("price_range_r", S, "word", "price_band", "prices"),
    R("vegetarian_options", I, "measure", "0:9:", "vegetarian dishes"),
    R("eta_minutes", I, "measure", "20:65: min", "estimated delivery"),
    R("event_name_r", S, "word", "event_kw", "event"),
    R("event_time", S, "datetime_result", "0:21", "when"),
    R("cinema", S, "word", "cinema", "cinema"),
    R("showtime_list", S, "word", "showtimes", "showtimes"),
    R("battery_pct", I, "measure", "8:100:%", "battery"),
    R("range_km_r", I, "measure", "20:520: km", "range"),
    R("locked_r", B, "fixed_bool", "true", "locked"),
    R("station_name", S, "word", "station", "station"),
    R("power_kw_r", I, "measure", "22:350: kW", "power"),
    R("available_ports", I, "measure", "0:8:", "free ports"),
    R("booking_ref_r", S, "id", "^#^#^^", "booking reference"),
    R("listing_title", S, "word", "listing", "listing"),
    R("listing_price", N, "money_result", "600:3800", "rent"),
    R("listing_id_r", S, "id", "LST-######", "listing ID"),
    R("viewing_id", S, "id", "VW-#####", "viewing ID"),
    R("estimated_value", N, "money_result", "90000:900000", "estimated value"),
    R("value_range", S, "word", "value_band", "range"),
    R("status_confirmed", S, "fixed", "confirmed", "status"),
    R("status_sent", S, "fixed", "sent", "status"),
    R("status_created", S, "fixed", "created", "status"),
    R("status_cancelled", S, "fixed", "cancelled", "status"),
    R("status_updated", S, "fixed", "updated", "status"),
    R("status_deleted", S, "fixed", "deleted", "status"),
    R("status_archived", S, "fixed", "archived", "status"),
    R("status_scheduled", S, "fixed", "scheduled", "status"),
    R("status_completed", S, "fixed", "completed", "status"),
    R("status_pending", S, "fixed", "pending approval", "status"),
    R("status_saved", S, "fixed", "saved", "status"),
    R("status_published", S, "fixed", "published", "status"),
    R("status_started", S, "fixed", "started", "status"),
    R("status_restarted", S, "fixed", "restarted", "status"),
    R("status_rolled_back", S, "fixed", "rolled back", "status"),
    R("status_done", S, "fixed", "done", "status"),
    R("status_on", S, "fixed", "on", "state"),
    R("status_off", S, "fixed", "off", "state"),
    R("status_locked", S, "fixed", "locked", "state"),
    R("status_unlocked", S, "fixed", "unlocked", "state"),
    R("status_playing", S, "fixed", "playing", "state"),
    R("status_paused", S, "fixed", "paused", "state"),
    R("status_following", S, "fixed", "following", "status"),
    R("status_shared", S, "fixed", "shared", "status"),
    R("status_submitted", S, "fixed", "submitted", "status"),
    R("status_enrolled", S, "fixed", "enrolled", "status"),
    R("status_added", S, "fixed", "added", "status"),
    R("status_open", S, "fixed", "open", "status"),
    R("status_drafted", S, "fixed", "draft ready", "status"),
    R("status_closed", S, "fixed", "closed", "status"),
};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

int corpus_n_kinds(void) { return N_KINDS; }
const struct corpus_kind *corpus_kind_at(int i) { return &kinds[i]; }

const struct corpus_kind *corpus_kind_find(const char *key)
{
    for (int i = 0; i < N_KINDS; i++)
        if (!strcmp(kinds[i].key, key)) return &kinds[i];
    return NULL;
}

/* ------------------------------------------------------------------ drawing */

static const struct corpus_gen_entry *gen_of(const struct corpus_kind *k)
{
    /* a small table: a linear scan is cheaper than the JSON work around every draw */
    for (const struct corpus_gen_entry *g = corpus_gens; g->name; g++)
        if (!strcmp(g->name, k->gen)) return g;
    return NULL;
}

/* Replace each "%s" of frame with value (frames are ours, values may hold '%'). */
static void frame_subst(char *out, size_t cap, const char *frame, const char *value)
{
    struct corpus_buf b = {0};
    for (const char *p = frame; *p;) {
        const char *s = strstr(p, "%s");
        if (!s) {
            corpus_buf_puts(&b, p);
            break;
        }
        corpus_buf_add(&b, p, (size_t)(s - p));
        corpus_buf_puts(&b, value);
        p = s + 2;
    }
    corpus_fmt(out, cap, "%s", b.p ? b.p : "");
    corpus_buf_free(&b);
}

void corpus_gen(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    memset(v, 0, sizeof *v);
    const struct corpus_gen_entry *g = gen_of(k);
    TERN_ASSERT(g != NULL);
    if (!g) {
        c->oom = true; /* a table bug; never a crash */
        return;
    }
    g->fn(c, k, v);
    if (!v->json) {
        c->oom = true;
        return;
    }
    if (k->frames) {
        char frame[128];
        corpus_pick(&c->rng, k->frames, frame, sizeof frame);
        frame_subst(v->say, CORPUS_SAY, frame, v->bare);
    } else if (!v->say[0]) {
        corpus_put(v->say, v->bare);
    }
    if (!v->show[0]) corpus_put(v->show, v->bare);
}

void corpus_ctx_new_call(struct corpus_ctx *c)
{
    c->currency[0] = '\0';
    c->temp_unit[0] = '\0';
    c->last_person[0] = '\0';
    c->last_day = 0;
    c->last_minute = 0;
    c->last_num = 0;
    c->src_lang = -1;
    c->unit_dim = 0;
    c->unit_from = -1;
    c->call_vals = NULL;
    c->call_kinds = NULL;
    c->call_n = 0;
}

/* ------------------------------------------------------------------ JSON Schema */

static void add_enum_from_arg(cJSON *s, const char *arg)
{
    cJSON *e = cJSON_AddArrayToObject(s, "enum");
    for (const char *p = arg; p && *p;) {
        const char *eq = strchr(p, '='), *semi = strchr(p, ';');
        if (!eq) break;
        char v[64];
        corpus_fmt(v, sizeof v, "%.*s", (int)(eq - p), p);
        cJSON_AddItemToArray(e, cJSON_CreateString(v));
        p = semi ? semi + 1 : NULL;
    }
}

static cJSON *prop(const char *type, const char *desc)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    if (desc) cJSON_AddStringToObject(o, "description", desc);
    return o;
}

/* Object kinds: their properties, all required. */
static void object_props(const struct corpus_kind *k, cJSON *s)
{
    cJSON *props = cJSON_AddObjectToObject(s, "properties");
    cJSON *req = cJSON_AddArrayToObject(s, "required");
    struct {
        const char *name, *type, *desc, *format;
    } f[4] = {{0}};
    int n = 0;
    if (!strcmp(k->gen, "address")) {
        f[0].name = "street", f[0].type = "string";
        f[1].name = "city", f[1].type = "string";
        f[2].name = "postal_code", f[2].type = "string";
        f[3].name = "country", f[3].type = "string", f[3].desc = "ISO 3166-1 alpha-2 code";
        n = 4;
    } else if (!strcmp(k->gen, "coords")) {
        f[0].name = "lat", f[0].type = "number";
        f[1].name = "lon", f[1].type = "number";
        n = 2;
    } else if (!strcmp(k->gen, "time_window")) {
        f[0].name = "start", f[0].type = "string", f[0].format = "date-time";
        f[1].name = "end", f[1].type = "string", f[1].format = "date-time";
        n = 2;
    } else if (!strcmp(k->gen, "dimensions")) {
        f[0].name = "length_cm", f[0].type = "integer";
        f[1].name = "width_cm", f[1].type = "integer";
        f[2].name = "height_cm", f[2].type = "integer";
        n = 3;
    }
    for (int i = 0; i < n; i++) {
        cJSON *p = prop(f[i].type, f[i].desc);
        if (f[i].format) cJSON_AddStringToObject(p, "format", f[i].format);
        cJSON_AddItemToObject(props, f[i].name, p);
        cJSON_AddItemToArray(req, cJSON_CreateString(f[i].name));
    }
}

static cJSON *item_schema(const struct corpus_kind *k)
{
    if (!strcmp(k->gen, "numlist")) return prop("integer", NULL);
    if (!strcmp(k->gen, "order_items")) {
        cJSON *o = prop("object", NULL);
        cJSON *props = cJSON_AddObjectToObject(o, "properties");
        cJSON_AddItemToObject(props, "product", prop("string", "Product name"));
        cJSON *q = prop("integer", "How many");
        cJSON_AddNumberToObject(q, "minimum", 1);
        cJSON_AddItemToObject(props, "quantity", q);
        cJSON *req = cJSON_AddArrayToObject(o, "required");
        cJSON_AddItemToArray(req, cJSON_CreateString("product"));
        cJSON_AddItemToArray(req, cJSON_CreateString("quantity"));
        return o;
    }
    char item[48];
    corpus_arg_field(k->arg, 0, item, sizeof item);
    const struct corpus_kind *ik = corpus_kind_find(item);
    cJSON *s = prop(ik && ik->type == CT_INTEGER ? "integer" : "string", NULL);
    if (ik && ik->format) cJSON_AddStringToObject(s, "format", ik->format);
    return s;
}

cJSON *corpus_kind_schema(const struct corpus_kind *k, const char *desc)
{
    static const char *const type_names[] = {"string", "integer", "number", "boolean", "array", "object"};
    cJSON *s = prop(type_names[k->type], desc);
    if (!strcmp(k->gen, "enum")) add_enum_from_arg(s, k->arg);
    if (!strcmp(k->gen, "lang") || !strcmp(k->gen, "lang_src")) {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        bool six = !strcmp(k->gen, "lang_src") || (k->arg && k->arg[0] == '6');
        for (int i = 0; corpus_lang_code(six, i); i++)
            cJSON_AddItemToArray(e, cJSON_CreateString(corpus_lang_code(six, i)));
    }
    if (!strcmp(k->gen, "unit")) {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        for (int i = 0; corpus_unit_code(i); i++) cJSON_AddItemToArray(e, cJSON_CreateString(corpus_unit_code(i)));
    }
    if (!strcmp(k->gen, "temp_unit_linked")) {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        cJSON_AddItemToArray(e, cJSON_CreateString("celsius"));
        cJSON_AddItemToArray(e, cJSON_CreateString("fahrenheit"));
    }
    if (k->format) cJSON_AddStringToObject(s, "format", k->format);
    if (k->flags & KF_BOUNDS) {
        cJSON_AddNumberToObject(s, "minimum", corpus_arg_int(k->arg, 0, 0));
        cJSON_AddNumberToObject(s, "maximum", corpus_arg_int(k->arg, 1, 100));
    }
    if (k->type == CT_ARRAY) cJSON_AddItemToObject(s, "items", item_schema(k));
    if (k->type == CT_OBJECT) object_props(k, s);
    return s;
}
