#!/usr/bin/env python3
"""Embeds openapi.json in a C file: hangard_openapi[] and its length."""
import json
import sys

src, out = sys.argv[1], sys.argv[2]
with open(src, "rb") as f:
    data = f.read()
json.loads(data)  # a malformed document fails the build, not a client
with open(out, "w") as f:
    f.write("/* Generated from openapi.json at build time. */\n#include <stddef.h>\n")
    f.write("extern const char hangard_openapi[];\nextern const size_t hangard_openapi_len;\n")
    f.write("const char hangard_openapi[] = {\n")
    for i in range(0, len(data), 16):
        f.write("".join("%d," % b for b in data[i:i + 16]) + "\n")
    f.write("0};\nconst size_t hangard_openapi_len = %d;\n" % len(data))
