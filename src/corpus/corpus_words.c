/* corpus_words.c — the word lists the corpus draws values from, written for tern (no dataset was
 * copied). Each list is one "a|b|c" string; corpus_word() draws from it. Names and places mix
 * scripts on purpose (accents, CJK, Hangul, Turkish, Polish) so that a model learns to copy
 * arguments byte for byte; domains are example.* (RFC 2606) so no address is real. */
#include <string.h>

#include "corpus/corpus.h"

struct word_list {
    const char *name;
    const char *words;
};

static const struct word_list lists[] = {
    {"first_name",
     "James|Olivia|Liam|Emma|Noah|Ava|Ethan|Mia|Lucas|Sophie|Daniel|Grace|Samuel|Chloe|Henry|Ruby|"
     "Oscar|Isla|José|María|Lucía|Andrés|Martín|Sofía|João|Inês|Camila|Mateo|Chloé|Léa|Théo|Élodie|"
     "François|Amélie|Jürgen|Björn|Søren|Åsa|Lena|Matthias|Freya|Sven|Łukasz|Małgorzata|Dušan|Ayşe|"
     "Çağrı|Mehmet|Wei|Mei|Hiroshi|Yuki|Aiko|Haruto|Min-jun|Ji-woo|Priya|Arjun|Ananya|Rohan|Linh|"
     "Omar|Layla|Yusuf|Fatima|Karim|Nour|Amara|Kwame|Chinedu|Zanele|Zoë|Niamh|Siobhán|Ingrid|Tomás"},
    {"last_name",
     "Smith|Johnson|Brown|Garcia|Martínez|López|Hernández|Müller|Schmidt|Weber|Dubois|Lefèvre|"
     "Moreau|Rossi|Bianchi|Kowalski|Nowak|Novák|Andersson|Johansson|Nielsen|Østergaard|Yılmaz|"
     "Öztürk|Tanaka|Suzuki|Sato|Kim|Park|Lee|Chen|Wang|Li|Nguyen|Tran|Patel|Sharma|Singh|Okafor|"
     "Mensah|Haddad|Khalil|O'Brien|MacLeod|da Silva|dos Santos|Fernández|Gómez|Ivanova|Petrov|"
     "Ferreira|Costa|Jansen|de Vries|Virtanen|Korhonen|Papadopoulos|Horvat"},
    {"native_name", "李伟|王芳|张敏|陈静|田中優子|佐藤健|鈴木花子|김민준|박지은|이서연|Αλέξανδρος Παππάς|Дмитрий Соколов"},
    {"ascii_first", "james|olivia|liam|emma|noah|ava|ethan|mia|lucas|sophie|daniel|grace|sam|chloe|"
                    "henry|ruby|oscar|priya|arjun|wei|mei|yuki|omar|layla|kwame|amara|lena|sven|"
                    "ines|mateo|camila|leo|nina|raj|tariq|hana|ivan|marta|pablo|elif"},
    {"ascii_last", "smith|brown|garcia|lopez|muller|dubois|rossi|nowak|andersson|nielsen|tanaka|"
                   "sato|kim|park|chen|wang|nguyen|patel|sharma|okafor|mensah|haddad|obrien|silva|"
                   "costa|jansen|virtanen|horvat|petrov|moreau|weber|fischer|ito|ali|khan"},
    {"email_domain", "example.com|example.org|example.net|mail.example.com|corp.example.org|"
                     "acme.example|northwind.example|studio.example.net|uni.example.edu"},
    {"city",
     "Lyon|Paris|Berlin|München|Zürich|Genève|Kraków|Wrocław|São Paulo|Bogotá|Ciudad de México|"
     "Montréal|Reykjavík|Malmö|Göteborg|İstanbul|Tokyo|東京|大阪|北京|上海|서울|Seoul|Mumbai|"
     "Bengaluru|Cairo|Nairobi|Lagos|Accra|Cape Town|Sydney|Auckland|Toronto|Vancouver|Chicago|"
     "Austin|Denver|Seattle|Boston|Lisbon|Porto|Madrid|Sevilla|Málaga|Milano|Napoli|Athens|"
     "Dubrovnik|Tallinn|Vilnius|Rīga|Helsinki|Oslo|København|Amsterdam|Utrecht|Antwerpen|Dublin|"
     "Edinburgh|Manchester|Prague|Vienna|Budapest|Marrakech|Hanoi|Singapore|Taipei|Lima|Santiago"},
    {"region", "Brittany|Bavaria|Catalonia|Tuscany|Scottish Highlands|Hokkaidō|Queensland|"
               "British Columbia|Andalucía|Île-de-France|Jutland|Lapland|Patagonia|Kerala|Texas|"
               "New England|Cornwall|Algarve|Dalmatia|Normandy"},
    {"place_query", "coffee shop|pharmacy|bakery|bike repair shop|co-working space|vegan restaurant|"
                    "ATM|gas station|bookstore|laundromat|playground|sushi bar|hardware store|"
                    "EV charging station|post office|swimming pool|ramen place|florist"},
    {"landmark", "the central station|the airport|the old town|the city museum|the main library|"
                 "the harbour|the university campus|the botanical garden|the stadium|the cathedral|"
                 "Gare de Lyon|Plaza Mayor|Alexanderplatz|Shibuya crossing|the Grand Bazaar"},
    {"company_head", "Northwind|Bluefin|Copperleaf|Kestrel|Lumen|Orbital|Maplewood|Tidewater|Quillon|"
                     "Harborline|Brightwater|Sable|Juniper|Cobalt|Fernhill|Aurora|Larkspur|Ironbark|"
                     "Pinecrest|Solstice|Meridian|Halcyon|Riverstone|Nimbus"},
    {"company_tail", "Labs|Analytics|Systems|Foods|Freight|Clinic|Bank|Legal|Travel|Studio|Energy|"
                     "Logistics|Health|Media|Robotics|Outfitters|Partners|Software|Insurance|Co."},
    {"product",
     "USB-C cable/USB-C cables|phone stand/phone stands|wireless mouse/wireless mice|"
     "notebook/notebooks|water bottle/water bottles|desk lamp/desk lamps|yoga mat/yoga mats|"
     "coffee grinder/coffee grinders|AA battery pack/AA battery packs|HDMI adapter/HDMI adapters|"
     "mechanical keyboard/mechanical keyboards|backpack/backpacks|rain jacket/rain jackets|"
     "tea kettle/tea kettles|monitor arm/monitor arms|laptop sleeve/laptop sleeves|"
     "plant pot/plant pots|bike light/bike lights|travel adapter/travel adapters|"
     "noise-cancelling headset/noise-cancelling headsets|french press/french presses|"
     "webcam cover/webcam covers|extension cord/extension cords|storage box/storage boxes"},
    {"product_category", "electronics|kitchen|outdoor|office|books|toys|garden|sports|beauty|home"},
    {"search_query", "noise-cancelling headphones|standing desk|vegan protein bar|ergonomic chair|"
                     "4K monitor|hiking boots|espresso machine|kids' raincoat|cast iron skillet|"
                     "portable charger|linen sheets|mechanical pencil|camping stove|air purifier"},
    {"doc_query", "invoice March|contract renewal|project Atlas|onboarding checklist|Q3 roadmap|"
                  "offsite agenda|security audit|budget 2025|release notes|tax receipts|"
                  "design review|customer feedback|vendor quote|expense policy"},
    {"title",
     "Q3 budget review|1:1 with Priya|Design sync|Quarterly planning|Dentist|Sprint retro|"
     "Team lunch 🍜|Onboarding: Łukasz|Board prep|Release 2.4 go/no-go|Café con el equipo|"
     "Yoga class|Parent–teacher meeting|Tax documents|Vet appointment for Milo|Coffee with Zoë|"
     "Roadmap kickoff|Interview debrief|Customer demo — Tidewater|Garage sale 🏷️|Book club|"
     "Security training|Lease renewal|Offsite planning|Piano lesson|Migration dry run|"
     "会議: 新製品|Weekly sync ☕|Recital rehearsal|Budget sign-off"},
    {"subject", "Q3 numbers|Invoice #4471|Quick question about the lease|Trip itinerary ✈️|"
                "Re: offsite dates|Your order has shipped|Welcome aboard!|Draft for review|"
                "Meeting notes — 14 March|Catering options|Résumé — senior designer|"
                "Follow-up from today's call|Updated contract|Schedule change|Thank you 🙏"},
    {"message",
     "Running 10 minutes late, sorry!|Can we move our call to Thursday?|"
     "Happy birthday! 🎉 Hope you have a great day.|Merci pour ton aide hier 🙏|"
     "¿Nos vemos a las 6 en la estación?|Bin gleich da – stehe noch im Stau.|"
     "明日の会議は10時からです。|会议改到下午三点。|Don't forget the keys 🔑|"
     "The build is green ✅ — merging now.|Rappel : la réunion commence à 14 h.|"
     "Thanks for the quick turnaround, much appreciated!|Lunch at Café Zoë? 🥗|"
     "I'll send the slides tonight.|Pickup is at gate B12 ✈️|Good luck with the exam! 💪|"
     "Please review the PR when you can.|Dinner's at 7 — bring dessert 🍰|Olá! Chego às 15h.|"
     "감사합니다! 내일 봬요.|Pizza Friday 🍕?|The invoice is attached; let me know if anything's off.|"
     "We're out of milk 🥛|Your package was left with the neighbour at no. 12.|"
     "Agreed on the Q3 targets; next review in two weeks.|Can you water the plants while I'm away? 🌱|"
     "Landed safely, see you at the hotel.|Prices go up on the 1st — order before then.|"
     "Ça marche, à demain !|The server's back up — false alarm.|¡Felicidades por el nuevo trabajo! 🥳|"
     "Kannst du mir die Präsentation schicken?|Heading out now, ETA 20 min 🚗"},
    {"note", "Customer wants a demo next week.|Left a voicemail, will try again Friday.|"
             "Interested in the annual plan; send pricing.|Asked about GDPR compliance.|"
             "Prefers e-mail over phone.|Budget approved for Q4.|Needs a French-speaking contact.|"
             "Renewal due in 60 days.|Mentioned a competitor's offer.|Très intéressé par l'offre.|"
             "Follow up after the trade show.|Decision maker is the CFO."},
    {"song", "Midnight Ferry|Paper Lanterns|Golden Hour Drive|Salt and Cedar|Neon Harbour|"
             "Café du Matin|Slow Orbit|Northern Lights Waltz|River of Glass|Kite Weather|"
             "夜明けのうた|Canción del Viento|Seven Bridges|Lemon Tree Avenue|Ember & Ash"},
    {"artist", "The Velvet Owls|Mara Lindqvist|Los Tres Faroles|Kenji & the Tides|Amélie Roux|"
               "Brass Lantern|Nova Quartet|Sunday Radio|Björk Halvorsen|DJ Monsoon|Orquesta Luna|"
               "Hana Mori|The Cartographers|Zanele Dube"},
    {"playlist", "Focus Flow|Road Trip 2025|Sunday Morning ☕|Workout Mix|Chill Evenings|"
                 "Dinner Party|Rainy Day Jazz|Throwbacks|Deep Work|Kids' Favourites|Été 🌞"},
    {"genre", "jazz|indie rock|classical|hip hop|electronic|folk|k-pop|reggaeton|blues|ambient"},
    {"team", "Riverside Rovers|Northport Mariners|Valencia Azul|FC Lindenau|Harbour City Hawks|"
             "Sapporo Snowbirds|Atlético Sierra|Kingsbridge United|Oslo Nordlys|Cairo Falcons|"
             "Lyon Lumière|Seoul Dragons"},
    {"league", "Northern Premier League|Liga Costa|Continental Basketball League|Pacific Rugby Cup|"
               "Metro Hockey League|Women's Super League|Coastal Cricket Series"},
    {"player", "Mateo Álvarez|Kwame Asante|Lena Fischer|Yuki Tanaka|Priya Raman|Søren Holm|"
               "Chloé Martin|Omar Haddad|Ji-woo Park|Tomás Ferreira"},
    {"cuisine", "Italian|Japanese|Mexican|Indian|Thai|Lebanese|Ethiopian|French|Korean|Peruvian|Greek|Vietnamese"},
    {"dish", "margherita pizza|chicken tikka masala|pad thai|tonkotsu ramen|falafel wrap|"
             "beef pho|shakshuka|mushroom risotto|fish tacos|bibimbap|spanakopita|ceviche"},
    {"ingredient", "eggs|spinach|feta|chickpeas|rice|tofu|tomatoes|garlic|lentils|salmon|"
                   "mushrooms|zucchini|coconut milk|ginger|potatoes|quinoa|basil|lemons|onions|yogurt"},
    {"food", "banana|oatmeal|greek yogurt|avocado toast|apple|almonds|brown rice|grilled chicken|"
             "lentil soup|dark chocolate|croissant|orange juice"},
    {"restaurant", "Chez Marie|Trattoria Sole|Sakura Garden|La Cantina|Spice Route|The Green Fork|"
                   "Bistro Lumière|Taquería El Sol|Seoul Kitchen|Noodle House 88|Café Zoë|Le Petit Nord"},
    {"hotel", "Hotel Miramar|The Linden House|Hôtel des Arts|Harbourview Inn|Grand Hotel Nord|"
              "Casa Azul|Ryokan Hanami|The Copper Kettle B&B|Hotel Zentral|Alpine Lodge Säntis"},
    {"airline", "Northwind Air|SkyBridge|Aurora Airlines|Pacific Wings|Iberia Sol|Nordic Jet|Cobalt Air"},
    {"carrier", "SwiftShip|ParcelNorth|Orbital Freight|Kestrel Express|PostaLinea|BlueBox Couriers"},
    {"service", "payments-api|auth-service|search-indexer|checkout|notification-worker|image-resizer|"
                "billing-gateway|user-profile|report-builder|inventory-sync|email-sender|web-frontend"},
    {"host", "web-01|web-02|db-primary|db-replica-2|build-agent-3|cache-01|worker-07|edge-fra-1"},
    {"repo", "tern|payments-api|mobile-app|infra-terraform|design-system|data-pipelines|docs-site"},
    {"branch", "main|release/2.4|feature/dark-mode|fix/login-timeout|hotfix/checkout-500|develop"},
    {"database", "analytics|production|orders_db|crm|warehouse|staging_db|inventory"},
    {"table", "customers|orders|invoices|events|users|products|payments|shipments|sessions|tickets"},
    {"column", "id|name|email|created_at|status|total|country|amount|user_id|updated_at|price|quantity"},
    {"schema", "public|sales|reporting|raw|archive"},
    {"folder", "/home/ana/reports|/srv/backups|/Users/zoë/Documents|/data/exports|/home/wei/projects|"
               "/mnt/shared/design|/var/log/app|/Users/léa/Photos/été-2024|/home/omar/Downloads"},
    {"file_name", "q3-summary.pdf|budget_2025.xlsx|notes.md|invoice-4471.pdf|photo_001.jpg|"
                  "contrat-signé.pdf|slides-final.pptx|data.csv|backup.tar.gz|résumé.docx|"
                  "報告書.pdf|meeting-notes.txt|logo.svg|report_v2.docx"},
    {"file_type", "pdf|docx|xlsx|csv|jpg|png|txt|md|pptx"},
    {"tag", "urgent|billing|follow-up|vip|bug|design|legal|travel|personal|q3|réunion|onboarding"},
    {"topic", "renewable energy|space exploration|local elections|AI regulation|electric cars|"
              "housing market|climate adaptation|public transport|chess|vaccines|startups|"
              "ocean plastics|world cup qualifiers|the film festival"},
    {"course_subject", "linear algebra|organic chemistry|French for beginners|data structures|"
                       "world history|music theory|statistics|creative writing|microeconomics|Japanese N4"},
    {"room", "living room|kitchen|bedroom|office|bathroom|hallway|kids' room|garage|dining room"},
    {"device", "hallway thermostat|front door lock|kitchen lights|garage door|robot vacuum|"
               "bedroom fan|garden sprinkler|living room speaker|porch camera|air purifier"},
    {"door", "front door|back door|garage door|side gate|patio door"},
    {"color", "warm white|cool white|blue|red|green|purple|amber|soft pink"},
    {"scene", "Movie night|Good morning|Away mode|Dinner time|Bedtime|Focus|Party 🎉"},
    {"medication", "ibuprofen|amoxicillin|vitamin D|metformin|cetirizine|omeprazole|paracetamol"},
    {"symptom", "pounding headache|mild fever and sore throat|lower back pain|"
                "itchy eyes and sneezing|trouble sleeping|dizziness when standing up|"
                "stomach ache after meals|a persistent dry cough"},
    {"specialty", "dermatology|cardiology|pediatrics|general practice|physiotherapy|dentistry|ophthalmology"},
    {"doctor", "Dr. Amara Okafor|Dr. Jürgen Weber|Dr. Mei Chen|Dr. Lucía Fernández|Dr. Rohan Patel|Dr. Siobhán Kelly"},
    {"lab_test", "blood count|cholesterol panel|vitamin D level|thyroid panel|HbA1c|iron level"},
    {"department", "engineering|marketing|finance|sales|legal|people operations|customer support|design"},
    {"role", "senior backend engineer|product designer|data analyst|account executive|"
             "marketing manager|support specialist|HR business partner|legal counsel"},
    {"legal_query", "non-compete enforceability|tenant deposit return|software license liability|"
                    "wrongful termination|data breach notification|trademark infringement online"},
    {"party", "Northwind Labs|Copperleaf Foods|Kestrel Systems|Maria Lopez|Tidewater Bank|"
              "Juniper Media|Ironbark Robotics|Chen Wei|Solstice Energy"},
    {"headline_kw", "markets|elections|weather|science|football|technology|health|culture"},
    {"movie", "The Quiet Harbour|Paper Moons|Last Train to Lisbon|Orbit of Two|Le Jardin Secret|"
              "Thunder Valley|The Cartographer's Daughter|Night Market|風の街|Salt Road"},
    {"event_kw", "jazz concert|food festival|comedy night|book fair|tech meetup|opera|half marathon|"
                 "art exhibition|farmers market|film screening"},
    {"vehicle", "VH-2041|CAR-7731|EV-3308|VH-5519|TRK-0922"},
    {"service_type", "oil change|tire rotation|brake inspection|annual service|battery check|windshield repair"},
    {"workout", "run|bike ride|swim|strength session|yoga session|hike|rowing workout"},
    {"skill", "Python|SQL|public speaking|negotiation|Spanish|Kubernetes|watercolor"},
    {"word", "serendipity|ephemeral|ubiquitous|resilient|meticulous|eloquent|candid|frugal|tenacious|whimsical"},
    {"handle", "maria_k|wei.chen|the_real_omar|zoe.makes|lukasz_dev|priya.codes|nightowl42|"
               "cafe_zoe|kestrel_sys|amelie.r|hiro_t|jo.silva"},
    {"channel", "#general|#engineering|#random|#design-reviews|#incidents|#sales-team|#announcements"},
    {"group", "Weekend hikers|Book club 📚|Family|Project Atlas|Lunch crew|Flatmates"},
    {"status_text", "In meetings until 3|On vacation 🌴|Heads down, focus time|Working from Lisbon|Out sick|Commuting 🚆"},
    {"post_text", "Excited to share that our team just shipped v2.0! 🚀|"
                  "Grateful for everyone who came to the meetup last night 🙏|"
                  "Nouveau billet de blog sur l'accessibilité web.|"
                  "Hiring: we're looking for a backend engineer (remote, EU).|"
                  "今日はいい天気ですね ☀️|Three lessons from a year of remote work 🧵|"
                  "Our café is open late this Friday — live music from 8 🎶"},
    {"reminder", "call the plumber|take the bins out|renew the passport|pick up the dry cleaning|"
                 "pay the electricity bill|book the car service|send Léa the photos|water the plants"},
    {"goal", "steps|weight|running distance|active minutes|sleep hours"},
    {"ticket_subject", "Can't log in after password reset|Invoice shows the wrong VAT|"
                       "App crashes when uploading photos|Refund not received|"
                       "Need to change my delivery address|Two-factor codes not arriving|"
                       "Export to CSV is empty|Wrong item delivered"},
    {"ticket_body", "Since yesterday the login page says my password is wrong, even after resetting it twice.|"
                    "The invoice from March charges 21% VAT but we're based in Germany (19%).|"
                    "Every time I pick more than 5 photos the app closes. iPhone, latest version.|"
                    "I returned the jacket three weeks ago and still haven't seen the refund.|"
                    "The export button produces a file with only the header row.|"
                    "I ordered a blue backpack and received a green one."},
    {"kb_query", "reset password|change billing address|export data|cancel subscription|"
                 "two-factor authentication|update payment method|delete account"},
    {"project", "Atlas|Website relaunch|Q4 migration|Mobile app v3|Office move|Hiring plan|Data warehouse"},
    {"task", "Draft the launch email|Update the pricing page|Review Łukasz's PR|Book venue for the offsite|"
             "Write Q3 summary|Fix flaky checkout test|Order new laptops|Prepare board slides|"
             "Translate FAQ into Spanish|Renew SSL certificate"},
    {"incident", "Checkout returns 500 errors|Login latency above 2s|Search index out of date|"
                 "Emails delayed by 30 minutes|Disk almost full on db-primary|Payment webhook failures"},
    {"backup_label", "pre-migration|nightly|before-release-2.4|end-of-quarter|manual-snapshot"},
    {"index_name", "idx_orders_user_id|idx_customers_email|idx_events_created_at|idx_payments_status"},
    {"warehouse", "AMS-1|FRA-2|LYS-1|MAD-3|NYC-1|SIN-2"},
    {"listing_kw", "apartment|house|studio|loft|townhouse"},
    {"article_slug", "city-council-approves-new-tram-line|researchers-map-deep-sea-vents|"
                     "local-bakery-wins-national-prize|how-heat-pumps-work|marathon-route-announced"},
    {"expense_desc", "Taxi from the airport|Team dinner with the client|Train ticket to Lyon|"
                     "Conference registration|Hotel, two nights|Office chair|Software subscription"},
    {"assignment", "Essay on the French Revolution|Problem set 4|Lab report: titration|"
                   "Final project proposal|Reading response: chapter 3"},
    {"scientific", "entropy|photosynthesis|plate tectonics|supply and demand|recursion|the Doppler effect"},
    {"mail_folder", "Receipts|Newsletters|Clients|Travel|Archive 2024|Familie|Invoices|Réunions"},
    {"memo", "Rent March|Dinner 🍣|Invoice 4471|Birthday gift 🎁|Loyer avril|Gym membership|Flat deposit|Concert tickets"},
    {"product_single", "desk lamp|rain jacket|coffee grinder|backpack|mechanical keyboard|yoga mat|"
                       "travel adapter|monitor arm|water bottle|wireless mouse|tea kettle|webcam"},
    {"condition", "sunny|partly cloudy|overcast|light rain|heavy rain|thunderstorms|snow showers|fog|clear skies|windy and dry|drizzle"},
    {"pollutant", "PM2.5|ozone|NO2|PM10"},
    {"alert", "Heavy rain warning|Wind advisory|Heat advisory|Flood watch|Winter storm warning|Thunderstorm watch|Coastal flood advisory"},
    {"alert_level", "moderate|severe|extreme"},
    {"pollen_level", "low|moderate|high|very high"},
    {"pollen_type", "grass|birch|ragweed|oak|olive|alder"},
    {"archive", "q3-reports.zip|photos-2024.zip|backup-march.zip|site-assets.zip|contrats.zip|handover.zip"},
    {"playlist_desc", "Songs for late-night coding|Tunes for the drive to Porto 🚗|Quiet piano for reading|"
                      "Bangers only 🔥|Música para cocinar"},
    {"speaker", "living room speaker|kitchen speaker|bedroom speaker|office speaker|soundbar"},
    {"leave_note", "Family wedding in Porto 💒|Moving house|Doctor's orders|Trip to 京都|Kids' school holidays"},
    {"submission_comment", "Sorry it's a day late|Includes the bonus question|Sources are in the appendix|Final version ✅"},
    {"resolution", "Password reset link re-sent; customer confirmed it works|Refund issued|Replacement shipped|"
                   "Duplicate of TCK-10422|Fixed in release 2.4.1"},
    {"special_request", "a table by the window|a high chair|it's a birthday 🎂|wheelchair access|a quiet corner"},
    {"route", "via the ring road|along the river|through the city centre|via the motorway|through the old town"},
    {"amenity", "free Wi-Fi, breakfast included|spa and pool|rooftop bar, gym|pet-friendly, parking|sea view, airport shuttle"},
    {"pharma_freq", "once a day|twice a day|every 8 hours|as needed|at bedtime"},
    {"lab_value", "13.8 g/dL|5.2 mmol/L|32 ng/mL|1.9 mIU/L|5.6 %|88 µg/dL"},
    {"lab_range", "12.0–15.5|< 5.2|30–100|0.4–4.0|< 5.7|60–170"},
    {"lab_flag", "normal|normal|slightly high|slightly low|normal"},
    {"venue", "Arena Nord|Teatro Real|Le Zénith|Harbour Hall|Blue Note Club|Stadtpark Bühne"},
    {"cinema", "Cinéma Lumière|Odeon Central|Kino Babylon|Cineplex Harbour"},
    {"showtimes", "14:15, 17:30 and 20:45|15:00 and 21:10|13:40, 18:20 and 22:00|19:30"},
    {"stage_name", "proposal|negotiation|qualified|closed won"},
    {"deal", "Tidewater renewal|Kestrel pilot|Juniper expansion|Aurora onboarding|Sable upsell"},
    {"finding", "The liability cap excludes data-protection claims.|Termination needs 90 days' notice.|"
                "Payment is due 60 days after invoice, longer than your policy.|No confidentiality term after expiry."},
    {"case_name", "Harbor v. Lindqvist|Okafor v. Meridian Health|State v. Kestrel Systems|In re Juniper Media|Rossi v. Tidewater Bank"},
    {"court", "Court of Appeals|Supreme Court|District Court|High Court"},
    {"deadline_type", "reply brief|discovery responses|motion to dismiss|expert reports"},
    {"issue", "comparison uses = instead of ==|unused variable|missing return type hints|possible division by zero"},
    {"step", "unit tests|lint|integration tests|build"},
    {"log_line", "connection pool exhausted|request timed out after 30s|retrying payment webhook|cache miss rate above 40%|started worker 7"},
    {"log_level_word", "ERROR|WARN|INFO"},
    {"language_code", "en|fr|es|de|ja|zh|it|pt|ko|nl"},
    {"top_song", "Midnight Ferry|Paper Lanterns|Golden Hour Drive|Salt and Cedar|Neon Harbour"},
    {"card_kind", "Visa debit|Mastercard credit|virtual card|travel card"},
    {"card_state", "active|active|frozen|expires soon"},
    {"flight_state", "on time|delayed 25 minutes|boarding|departed|delayed 1 hour|gate changed"},
    {"carry_on", "1 bag up to 8 kg|1 bag up to 10 kg plus a personal item|1 personal item only"},
    {"checked_bags", "none included|1 bag up to 23 kg|2 bags up to 23 kg each|1 bag up to 32 kg"},
    {"order_state", "processing|shipped|out for delivery|delivered|awaiting pickup"},
    {"stdout_line", "Filesystem  Size  Used Avail Use%  /dev/sda1  50G  41G  9G  83%|"
                    "3 pods running, 0 pending|active (running) since 09:12|1432|build ok"},
    {"build_state", "passed|failed|running|passed|cancelled"},
    {"build_time", "4 min 12 s|11 min 3 s|2 min 47 s|7 min 30 s"},
    {"file_size", "1.2 MB|348 KB|14.7 MB|2.1 GB|88 KB|512 MB"},
    {"route_km", "12.4 km|3.1 km|47 km|8.9 km|1.6 km|126 km"},
    {"route_time", "18 min|41 min|1 h 05 min|9 min|2 h 20 min|27 min"},
    {"place_name", "Café Lumen|Pharmacie du Parc|Bäckerei Sonne|Velo Doctor|The Reading Room|Sushi Kaze|Green Leaf Market"},
    {"song_length", "3:42|4:05|2:58|5:11|3:27"},
    {"dose_text", "400 mg|500 mg|1000 IU|850 mg|10 mg|20 mg"},
    {"pos", "noun|adjective|verb"},
    {"headline", "City approves new tram line|Researchers map deep-sea vents|Local bakery wins national prize|"
                 "Heat pumps explained|Marathon route announced|Storm expected this weekend|Startup raises seed round"},
    {"news_source", "Harbor Daily|The Northern Ledger|Radio Meridian|Le Quotidien Libre|Tech Brief"},
    {"score", "2–1|0–0|3–2|1–4|1–1|98–91|27–24"},
    {"match_status", "full time|after extra time|final|full time"},
    {"shipment_state", "in transit|out for delivery|delivered|held at customs|at the local depot"},
    {"grade", "A|A-|B+|B|B-|C+"},
    {"signature_state", "signed by all parties|awaiting one signature|sent, not yet opened|partially signed"},
    {"risk", "low|medium|high"},
    {"rows_preview", "id=17, name=Ana Lima, total=312.50|id=4, status=open, created_at=2025-01-03|"
                     "country=FR, total=10482|count=1432"},
    {"export_file", "/data/exports/orders.csv|/data/exports/customers.json|/srv/backups/events.parquet|/data/exports/invoices.xlsx"},
    {"ticket_state", "open|pending customer reply|in progress|resolved|escalated"},
    {"kb_title", "How to reset your password|Changing your billing address|Exporting your data|"
                 "Setting up two-factor authentication|Cancelling a subscription"},
    {"price_band", "€€ (mains 14–22)|€ (mains 8–12)|€€€ (mains 28–40)"},
    {"station", "Harbour Fast Charge|Central Parking P2|Ionix Autobahn Hub|GreenVolt Mall|City Hall Garage"},
    {"listing", "Bright 2-room flat near the park|Loft with terrace|Quiet studio, top floor|Family house with garden|"
                "Renovated 3-bedroom, balcony"},
    {"value_band", "±5%|±8%|±10%"},
    {"device_state", "online|online|offline|idle|running"},
    {"language_name", "French|Spanish|German|Japanese|Chinese|English|Italian|Portuguese|Korean|Dutch"},
};

const char *corpus_word_list(const char *list)
{
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        if (!strcmp(lists[i].name, list)) return lists[i].words;
    return NULL;
}

const char *corpus_word(struct corpus_ctx *c, const char *list, char *out, size_t cap)
{
    const char *words = corpus_word_list(list);
    if (!words) {
        out[0] = '\0';
        return out;
    }
    return corpus_pick(&c->rng, words, out, cap);
}
