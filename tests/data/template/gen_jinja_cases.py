# gen_jinja_cases.py — reference renderings for tests/test_template_jinja.c, made with Python
# Jinja2 (3.1.6 when generated) configured exactly as Hugging Face transformers renders chat
# templates. Run: python3 gen_jinja_cases.py  (writes jinja_cases.json next to it).
import json, jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols
def raise_exception(m): raise jinja2.exceptions.TemplateError(m)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters['tojson'] = tojson
env.globals['raise_exception'] = raise_exception
import datetime
env.globals['strftime_now'] = lambda f: datetime.datetime(2025,1,15,9,30,0).strftime(f)
V = {"xs": [3, 1, 2], "s": "Hello World", "d": {"b": 2, "a": 1, "c": None}, "u": "Ünïcödé 東京", "msgs": [{"role": "user", "content": "hi", "n": 1}, {"role": "assistant", "content": " yo ", "n": 2}, {"role": "tool", "content": "t", "n": 3}], "f": 0.1, "t": True, "none": None, "empty": [], "nested": {"a": {"b": [1, {"c": "x"}]}}}
cases = [
 ("ws_lstrip_trim", "  {% if true %}\n  x\n  {% endif %}\nend\n"),
 ("ws_plus", "  {%+ if true %}\nx{% endif +%}\ny"),
 ("ws_minus", "a  \n  {{- ' b ' -}}  \n c {#- c -#} d"),
 ("ws_comment_line", "a\n  {# note #}\nb"),
 ("ws_var_no_trim", "{{ 'a' }}\nb"),
 ("crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n"),
 ("loop_vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
 ("loop_prev_next", "{% for x in xs %}[{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}]{% endfor %}"),
 ("loop_cycle", "{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}"),
 ("loop_filter", "{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}"),
 ("loop_else", "{% for x in empty %}{{ x }}{% else %}none{% endfor %}"),
 ("loop_break_continue", "{% for x in [1,2,3,4,5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
 ("loop_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"),
 ("loop_dict_keys", "{% for k in d %}{{ k }}{% endfor %}"),
 ("loop_string", "{% for c in u %}{{ c }}.{% endfor %}"),
 ("nested_loop", "{% for a in [1,2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}"),
 ("scope_for", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"),
 ("scope_if", "{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"),
 ("namespace", "{% set ns = namespace(n=0, s='') %}{% for x in xs %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}"),
 ("macro_defaults", "{% macro m(a, b=2, c='z') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c='q') }} {{ m() }}"),
 ("macro_recursive", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}"),
 ("macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ s }}{% endmacro %}{{ m() }}"),
 ("set_block", "{% set x %}  a {{ 1 + 1 }}\n{% endset %}[{{ x }}]"),
 ("set_block_filter", "{% set x | upper %}abc{% endset %}{{ x }}"),
 ("filter_block", "{% filter upper %}hello {{ s }}{% endfilter %}"),
 ("raw", "{% raw %}{{ not parsed }}{% endraw %}"),
 ("str_filters", "{{ '  a b  '|trim }}|{{ s|upper }}|{{ s|lower }}|{{ 'hello wORLD-foo(bar'|title }}|{{ 'hELLO'|capitalize }}|{{ s|replace('o', '0') }}|{{ s|replace('o', '0', 1) }}|{{ s|length }}|{{ u|length }}|{{ u|upper }}"),
 ("list_filters", "{{ xs|join(',') }}|{{ xs|first }}|{{ xs|last }}|{{ xs|length }}|{{ xs|sort|join }}|{{ xs|sort(reverse=true)|join }}|{{ xs|reverse|join }}|{{ xs|sum }}|{{ xs|min }}|{{ xs|max }}|{{ ['b','A','a','B']|unique|join }}|{{ 'abc'|list }}|{{ xs|list }}"),
 ("map_select", "{{ msgs|map(attribute='role')|join(',') }}|{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='n')|list }}|{{ msgs|rejectattr('role', 'eq', 'user')|list|length }}|{{ xs|select('odd')|list }}|{{ xs|reject('odd')|list }}|{{ ['a','b']|map('upper')|join }}|{{ msgs|selectattr('n', 'gt', 1)|map(attribute='content')|map('trim')|join('+') }}|{{ msgs|selectattr('missing', 'defined')|list }}"),
 ("default_filter", "{{ undefinedvar|default('dflt') }}|{{ ''|default('x') }}|{{ ''|default('x', true) }}|{{ none|default('n') }}|{{ none|d('n', true) }}"),
 ("num_filters", "{{ '42'|int + 1 }}|{{ '3.9'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ 2|float }}|{{ -3|abs }}|{{ 2.567|round(2) }}|{{ 2.5|round }}|{{ 7|string ~ 'x' }}"),
 ("tojson", "{{ d|tojson }}|{{ nested|tojson }}|{{ u|tojson }}|{{ 'q\"\\\\\\n\\t\\x01'|tojson }}|{{ [1, 2.5, true, none, 1e20, 0.1]|tojson }}|{{ {}|tojson }}|{{ []|tojson }}"),
 ("tojson_indent", "{{ nested|tojson(indent=2) }}\n{{ msgs[0]|tojson(indent=4) }}\n{{ {'e': [], 'f': {}}|tojson(indent=2) }}"),
 ("indent_filter", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, first=true) }}|{{ 'a\\n\\nb\\n'|indent(2, blank=true) }}|{{ 'x\\n'|indent(3) }}"),
 ("items_dictsort", "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}|{% for k, v in d|dictsort %}{{ k }}{% endfor %}"),
 ("tests", "{{ s is string }}{{ xs is string }}{{ 1 is number }}{{ 1.5 is integer }}{{ 1 is integer }}{{ d is mapping }}{{ xs is mapping }}{{ xs is iterable }}{{ 1 is iterable }}{{ s is sequence }}{{ none is none }}{{ t is boolean }}{{ 1 is boolean }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby(3) }}{{ 2 is in(xs) }}{{ 'a' is lower }}{{ 'A' is upper }}{{ xs is defined }}{{ nope is undefined }}{{ t is true }}{{ t is false }}{{ 1 is eq 1 }}{{ 2 is ne 1 }}"),
 ("str_methods", "{{ 'a,b,,c'.split(',') }}|{{ '  a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'xxhixx'.strip('x') }}|{{ '  hi '.lstrip() }}|{{ '  hi '.rstrip() }}|{{ s.startswith('He') }}{{ s.startswith(('x', 'Hel')) }}{{ s.endswith('ld') }}|{{ s.find('o') }}{{ s.find('z') }}|{{ s.count('o') }}|{{ 'hello wORLD it''s'.title() }}|{{ s.replace('l', 'L', 2) }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ '123'.isdigit() }}{{ '12a'.isdigit() }}|{{ '-'.join(['a', 'b']) }}|{{ s.upper() }}{{ s.lower() }}|{{ 'abc'.capitalize() }}"),
 ("dict_methods", "{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }}"),
 ("slicing", "{{ xs[1:] }}{{ xs[:-1] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[-1] }}{{ xs[5:] }}|{{ u[1:4] }}{{ u[::-1] }}{{ u[-1] }}|{{ s[0] }}{{ s[-3:] }}"),
 ("operators", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 6 / 2 }} {{ 1 + 2.5 }} {{ 'ab' * 3 }} {{ 3 * [1] }} {{ 'a' ~ 1 ~ none ~ t }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 'z' not in xs }} {{ 2 in xs }} {{ 'a' in d }} {{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ not none }} {{ -xs[0] }} {{ 1 == 1.0 }} {{ t == 1 }} {{ 'x' if false }}|{{ 'a' if t else 'b' }} {{ [1,2] + [3] }} {{ 10 - 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ 'b' > 'a' }}"),
 ("printing", "{{ none }} {{ t }} {{ f }} {{ 1e20 }} {{ 1.5e-05 }} {{ 3.0 }} {{ 1/3 }} {{ xs }} {{ d }} {{ ['it''s', \"q\\\"\", 'a\\nb'] }} {{ (1,) }} {{ (1, 'a') }} {{ nested }} {{ 100000000000000000.0 }} {{ 0.0001 }} {{ 12345.678 }} {{ -0.5 }}"),
 ("literals", "{{ \"a\" 'b' }}|{{ '\\u00e9\\x41\\n' }}|{{ 'it\\'s' }}|{{ 1_000 }}|{{ True }}{{ False }}{{ None }}|{{ {'a': [1, (2, 3)], 'b': {}} }}|{{ [] }}|{{ 0.5e1 }}"),
 ("markup", "{{ '<a>'|safe + '<b>' }}|{{ '<b>' + '<a>'|safe }}|{{ '<&>'|escape }}|{{ '<x>'|e }}|{{ ('<a>'|safe + 'b')|length }}"),
 ("globals", "{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}|{{ dict(a=1, b='x') }}|{{ strftime_now('%Y-%m-%d %H:%M %b %A') }}|{{ namespace(a=1).a }}"),
 ("undefined_ok", "[{{ nope }}][{{ nope|length }}][{{ d.zz }}][{% for x in nope %}x{% endfor %}][{{ nope is defined }}][{{ nope|default('d') }}][{{ none.x is defined }}][{{ 'a' ~ nope }}][{{ d['zz'] is defined }}][{{ nope == nope }}][{{ xs[10] is defined }}]"),
 ("trailing_newline_kept_inner", "a\n\n"),
 ("chat_like", "{%- for m in msgs %}\n    {%- if m.role == 'user' %}\n        {{- '<u>' + m.content + '</u>\\n' }}\n    {%- elif m.role == 'assistant' %}\n        {{- '<a>' + m['content']|trim + '</a>\\n' }}\n    {%- else %}\n        {{- '<' + m.role + '>' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt is defined %}\n{{- 'GEN' }}\n{%- endif %}\n"),
 ("multiline_tags", "{%\n  set x = [\n    1,\n    2\n  ]\n%}\n{{\n  x|join('+')\n}}"),
 ("attr_int", "{{ xs.0 }}{{ nested.a.b.1.c }}"),
 ("num_round", "{{ 5|round }}|{{ 1234|round(-2) }}|{{ 1250.0|round(-2) }}|{{ 2.675|round(2) }}|{{ 15|round(-1) }}|{{ 25|round(-1) }}|{{ -25|round(-1) }}|{{ 1.5|round(400) }}|{{ 1.5|round(-400) }}|{{ 2.5|round(0, 'floor') }}|{{ 1234.5678|round(2, 'floor') }}|{{ -1234.5678|round(-2, 'ceil') }}|{{ 5|round(1, 'ceil') }}|{{ 1.5|round(true) }}|{{ 0.5|round }}|{{ 1.5|round }}|{{ -0.5|round }}|{{ 1e300|round(-300) }}|{{ 123.456|round(-1) }}|{{ 9.995|round(2) }}|{{ 250.0000001|round(-2) }}|{{ 950|round(-3) }}|{{ -9223372036854775807|round(-18) }}|{{ 4999999999999999999|round(-19) }}|{{ 1e22|round(-22) }}"),
 ("num_int_filter", "{{ ' 1_000 '|int }}|{{ '1__0'|int }}|{{ '0x1A'|int(base=16) }}|{{ '0x1A'|int(base=0) }}|{{ '1e5'|int }}|{{ '12'|int(base=3) }}|{{ 'inf'|int }}|{{ 'nan'|int }}|{{ '  -12 '|int }}|{{ '+5'|int }}|{{ '1.5e3'|int }}|{{ '\u0663'|int }}|{{ '\U0001d7d7'|int }}|{{ '12abc'|int }}|{{ '0b101'|int(base=0) }}|{{ '010'|int(base=0) }}|{{ 'z'|int(base=36) }}|{{ '7'|int(base=1) }}|{{ '-_1'|int }}|{{ '0x_1f'|int(base=16) }}|{{ '1.5'|int(base=16) }}|{{ 9223372036854775807|int }}|{{ '-9223372036854775808'|int }}|{{ 1e18|int }}|{{ -2.9|int }}|{{ none|int }}|{{ [1]|int(5) }}|{{ '\u3000 7 '|int }}|{{ '9223372036854775807'|int }}|{{ ''|int(3) }}"),
 ("num_float_filter", "{{ '  '|float }}|{{ '1_0.5'|float }}|{{ 'infinity'|float }}|{{ '-nan'|float }}|{{ '0x10'|float }}|{{ '1e400'|float }}|{{ '.5'|float }}|{{ '5.'|float }}|{{ '1e'|float }}|{{ '1_e5'|float }}|{{ '+InFiNiTy'|float }}|{{ 'nan(1)'|float }}|{{ '1e1_0'|float }}|{{ none|float }}|{{ true|float }}|{{ '1._5'|float }}|{{ ' -2.5E-3 '|float }}"),
 ("num_tests", "{{ 4.0 is divisibleby 2 }}{{ 3.0 is odd }}{{ true is odd }}{{ 7 is divisibleby 2.5 }}{{ (-9223372036854775807 - 1) is divisibleby(-1) }}{{ -3 is odd }}{{ (-9223372036854775807 - 1) is even }}{{ 3 is gt 2.5 }}{{ true is gt 0 }}{{ 'b' is gt 'a' }}{{ [1, 2] is lt [1, 3] }}{{ 2 is le 2 }}{{ 9007199254740993 is gt 9007199254740992.0 }}"),
 ("num_operators", "{{ 5.5 % 2 }} {{ 5.0 % -2 }} {{ -5.0 // 2 }} {{ 1 // 0.5 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ -0.0 % 5 }} {{ 0.0 % -5 }} {{ -1 // 3.0 }} {{ 2 ** -1 }} {{ 2.0 ** 0.5 }} {{ (-2.0) ** 2 }} {{ 1e308 * 10 }} {{ -(1e308 * 10) }} {{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 9223372036854775807 // -1 }} {{ (-9223372036854775807 - 1) % -1 }} {{ 7 // -2 }} {{ 9007199254740993 == 9007199254740992.0 }} {{ 9007199254740993 > 9007199254740992.0 }} {{ 1 ** 9223372036854775807 }} {{ (-1) ** 9223372036854775807 }} {{ 0 ** 0 }} {{ 9223372036854775807 - 1 + 1 }} {{ 5.0 % (1e308 * 10) }} {{ -5.0 % (1e308 * 10) }} {{ 9007199254740993 / 1 }} {{ 7 / -2 }} {{ -(-9223372036854775807) }}"),
 ("num_slices", "{{ [1, 2][0:3:9223372036854775807] }}{{ [1, 2, 3][true:] }}{{ xs[::-9223372036854775807] }}{{ xs[(-9223372036854775807 - 1):9223372036854775807] }}{{ 'abc'[9223372036854775807:] }}{{ xs[1::9223372036854775807] }}{{ xs[::true] }}{{ xs[9223372036854775807::-1] }}{{ xs[(-9223372036854775807 - 1)::-1] }}{{ xs[2:0:(-9223372036854775807 - 1)] }}"),
 ("num_repeat_range", "[{{ '' * 1000000000000000000 }}][{{ [] * 1000000000000000000 }}][{{ 'ab' * -3 }}][{{ 0 * [1] }}][{{ true * 'x' }}]{{ range(9223372036854775806, 9223372036854775807)|list }}{{ range(0, 9223372036854775807, 4611686018427387904)|list }}{{ range(-9223372036854775807 - 1, 9223372036854775807, 9223372036854775807)|list }}{{ range(5, -9223372036854775807, -9223372036854775807)|list }}{{ range(3, 0)|list }}{{ range(true)|list }}{{ range(0, -5, -2)|list }}"),
 ("num_sum_abs_sort", "{{ [true, true]|sum }} {{ [1, 2.5]|sum }} {{ [[1], [2]]|sum(start=[]) }} {{ -9223372036854775807|abs }} {{ true|abs }} {{ 5.5|abs }} {{ [0.1, 0.2]|sum }} {{ [9007199254740993, 9007199254740992, 9007199254740992.0]|sort }} {{ {'b': 1, 'a': 2}|dictsort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ [-1, 2, -3]|map('abs')|list }}"),
 ("num_tojson_indent", "{{ {'a': [1]}|tojson(indent=0) }}|{{ {'a': 1}|tojson(indent=-1) }}|{{ [1]|tojson(indent=70) }}"),
 ("err_round_method", "{{ 2.5|round(0, 'x') }}"),
 ("err_zero_pow", "{{ 0 ** -1 }}"),
 ("err_float_pow_overflow", "{{ 10.0 ** 400 }}"),
 ("err_float_floordiv_zero", "{{ 5 // 0.0 }}"),
 ("err_divisibleby_zero", "{{ 7 is divisibleby 0 }}"),
 ("err_round_undefined", "{{ nope|round }}"),
 ("err_abs_undefined", "{{ nope|abs }}"),
 ("err_dictsort_mixed", "{{ {'b': 1, 2: 3}|dictsort }}"),
 ("err_sum_strings", "{{ ['a', 'b']|sum(start='') }}"),
 ("err_odd_string", "{{ 'a' is odd }}"),
 ("err_round_float_precision", "{{ 1.55|round(1.0) }}"),
 ("tojson_hf_options", "{{ u|tojson(true) }}|{{ d|tojson(sort_keys=true) }}|{{ {'b': [1, 2], 'a': '\u00e9'}|tojson(indent=2, sort_keys=true) }}|{{ [1, {'x': 2}]|tojson(separators=(',', ':')) }}|{{ {'a': [1]}|tojson(indent='\t') }}|{{ {'a': [1, 2]}|tojson(indent=2, separators=(', ', ' = ')) }}|{{ '\U0001F600 \u6771\x7f'|tojson(ensure_ascii=true) }}|{{ {2: 'a', 1: 'b', 1.5: 'c'}|tojson(sort_keys=true) }}|{{ {1.5: 1, true: 2, none: 3}|tojson }}|{{ [1]|tojson(indent=true) }}"),
 ("filters_signatures", "{{ {'x': 2, 'y': 1, 'z': 3}|dictsort(by='value', reverse=true) }}|{{ {'b': 'B', 'a': 'a', 'C': 'c'}|dictsort }}|{{ {'b': 'B', 'a': 'a', 'C': 'c'}|dictsort(true) }}|{{ msgs|min(attribute='n') }}|{{ msgs|max(attribute='role') }}|{{ ['b', 'A', 'c']|max }}|{{ ['b', 'A', 'c']|max(case_sensitive=true) }}|{{ 3 is greaterthan 2 }}{{ 3 is lessthan 2 }}{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}|{{ 9 is divisibleby(num=3) }}|{{ 'a b'|replace(old='a', new='c') }}|{{ xs|join(d='-') }}|{{ 'x'|default(default_value='y') }}|{{ s.split(sep='o', maxsplit=1) }}|{{ 2 is in(seq=xs) }}|{{ raise_exception is callable }}"),
 ("err_filter_too_many_args", "{{ 'a'|upper(1) }}"),
 ("err_filter_unknown_kwarg", "{{ 'a'|trim(x=1) }}"),
 ("err_filter_missing_arg", "{{ 'a'|replace('a') }}"),
 ("err_method_kwarg", "{{ d.get('a', default=1) }}"),
 ("err_method_too_many", "{{ 'abc'.upper(1) }}"),
 ("err_test_missing_arg", "{{ 3 is divisibleby }}"),
 ("err_dictsort_by", "{{ d|dictsort(by='x') }}"),
 ("err_global_kwarg", "{{ raise_exception(msg='x') }}"),
 ("err_tojson_sort_mixed", "{{ {1: 'a', 'b': 2}|tojson(sort_keys=true) }}"),
 ("err_undefined_attr", "{{ nope.x }}"),
 ("err_undefined_add", "{{ 'a' + nope }}"),
 ("err_dict_attr_add", "{{ 'x' + d.zz }}"),
 ("err_str_plus_dict", "{{ 'a' + d }}"),
 ("err_int_plus_str", "{{ 1 + 'a' }}"),
 ("err_raise", "{{ raise_exception('Boom: ' ~ 1) }}"),
 ("err_tojson_generator", "{{ xs|map('string')|tojson }}"),
 ("err_undefined_call", "{{ nope() }}"),
 ("err_append", "{{ xs.append(1) }}"),
 ("err_iterate_int", "{% for x in 5 %}{% endfor %}"),
 ("err_none_attr_attr", "{{ none.x.y }}"),
 ("err_compare", "{{ 1 < 'a' }}"),
 ("err_len_int", "{{ 5|length }}"),
 ("err_div_zero", "{{ 1 / 0 }}"),
 ("err_items_list", "{{ xs|items|list }}"),
 ("err_range_big", "{{ range(1000000)|length }}"),
]
out = []
for name, src in cases:
    try:
        r = env.from_string(src).render(**V)
        out.append({"name": name, "src": src, "ok": True, "out": r})
    except Exception as e:
        out.append({"name": name, "src": src, "ok": False, "kind": type(e).__name__, "msg": str(e)})
json.dump({"vars": V, "cases": out}, open('jinja_cases.json', 'w'), ensure_ascii=False, indent=1)
for o in out:
    print(o["name"], "->", repr(o.get("out"))[:150] if o["ok"] else o["kind"] + ": " + o["msg"])
