"""json_schema outputs parsed by Python's own validators: colibri-tiny
generates at temperature 1 (15 seeds per schema) through the Python
binding, constrained by string formats (date, time, date-time, uuid)
and by an allOf of object schemas, and every output must be what the schema
says by datetime.fromisoformat, uuid.UUID and checks written from the JSON
Schema definitions (not from colibri's grammar).
    python3 tests/python/test_schema_outputs.py"""

import datetime
import json
import os
import re
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import colibri  # noqa: E402

SEEDS = range(1, 16)
failed = 0

# RFC 3339's grammar for the parts (section 5.6), on top of Python's parsers, which also take
# other ISO 8601 spellings
RFC_DATE = r"\d{4}-\d{2}-\d{2}"
RFC_TIME = r"\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})"


def date_ok(v):
    return re.fullmatch(RFC_DATE, v) and datetime.date.fromisoformat(v)


def time_ok(v):
    return re.fullmatch(RFC_TIME, v) and datetime.time.fromisoformat(v)


def datetime_ok(v):
    return re.fullmatch(RFC_DATE + "[Tt]" + RFC_TIME, v) and datetime.datetime.fromisoformat(v)


def uuid_ok(v):
    return len(v) == 36 and str(uuid.UUID(v)) == v.lower()


CHECKS = {"date": date_ok, "time": time_ok, "date-time": datetime_ok, "uuid": uuid_ok}

ALLOF = {
    "$defs": {"Person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                          "born": {"type": "string", "format": "date"}},
                         "required": ["name", "born"]}},
    "allOf": [{"$ref": "#/$defs/Person"},
              {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                                "age": {"type": "integer", "minimum": 0, "maximum": 150}},
               "required": ["id"]}],
}


def allof_ok(v):
    """valid under Person and under the second member"""
    return (isinstance(v, dict) and set(v) <= {"name", "born", "id", "age"} and
            isinstance(v.get("name"), str) and len(v["name"]) <= 8 and isinstance(v.get("born"), str) and
            date_ok(v["born"]) and isinstance(v.get("id"), str) and uuid_ok(v["id"]) and
            ("age" not in v or (type(v["age"]) is int and 0 <= v["age"] <= 150)))


def run(m, name, schema, ok):
    global failed
    bad = []
    for seed in SEEDS:
        out = m.generate("Answer in JSON: ", max_tokens=160, temperature=1.0, seed=seed, json_schema=schema).read()
        try:
            good = bool(ok(json.loads(out)))
        except ValueError:
            good = False
        if not good:
            bad.append(out)
    print(("ok   " if not bad else "FAIL ") + "%s: %d/%d valid%s" % (name, len(SEEDS) - len(bad), len(SEEDS),
                                                                       "".join("\n     " + repr(b) for b in bad[:3])))
    failed += len(bad) > 0


with colibri.Model("models/colibri-tiny", threads=1) as m:
    for fmt, check in CHECKS.items():
        run(m, "format " + fmt, {"type": "string", "format": fmt}, lambda v, c=check: isinstance(v, str) and c(v))
    run(m, "allOf of two object schemas", ALLOF, allof_ok)

print("%d failed" % failed)
sys.exit(1 if failed else 0)
