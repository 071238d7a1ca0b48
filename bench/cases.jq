# cases.jq — which tern eval cases a speculation benchmark runs (bench/spec_answers.sh,
# bench/serve_spec_answers.sh): one definition, so both measure the same set.
#
# echoes: the case's expected calls echo its request: every string argument value appears
# verbatim in the messages (what prompt lookup is for); a case without expected calls does not.
def echoes:
    ([.messages[] | .content // ""] | join(" ")) as $t
    | [(.expected // [])[] | .arguments | fromjson | to_entries[] | .value | select(type == "string")
       | . as $v | $t | contains($v)]
    | length > 0 and all;
