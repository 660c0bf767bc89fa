#!/usr/bin/env python3
"""Shows that each check of check-db-layer.py fails on the fault it guards
against, and passes on a tree that keeps SQLite and libpq in the engines."""
import importlib.util
import os
import tempfile
import unittest

spec = importlib.util.spec_from_file_location(
    'check_db_layer', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'check-db-layer.py'))
layer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layer)


def tree(files):
    d = tempfile.TemporaryDirectory()
    for rel, text in files.items():
        path = os.path.join(d.name, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
    return d


class Includes(unittest.TestCase):
    def test_engines_alone_pass(self):
        with tree({'libhangar/store/db-sqlite.c': '#include <sqlite3.h>\n',
                   'libhangar/store/db-postgres.c': '#include <libpq-fe.h>\n',
                   'libhangar/store/store.c': '#include "db.h"\n',
                   'tests/store/test-store.c': '#include <libpq-fe.h>\n#include <sqlite3.h>\n'}) as d:
            self.assertEqual(layer.check_includes(d), [])

    def test_include_elsewhere_fails(self):
        for rel, line in (('libhangar/store/sessions.c', '#include <sqlite3.h>'),
                          ('libhangar/store/checkpoints.c', '  #  include "sqlite3.h"'),
                          ('programs/hangard/main.c', '#include <libpq-fe.h>'),
                          ('libhangar/store/db-sqlite.c', '#include <postgresql/libpq-fe.h>'),
                          ('libhangar/store/db-postgres.c', '#include <sqlite3.h>')):
            with tree({rel: '/* x */\n' + line + '\n'}) as d:
                problems = layer.check_includes(d)
                self.assertEqual(len(problems), 1, rel)
                self.assertIn(rel + ':2', problems[0])


NM = """libhangar_internal.a:store_db-sqlite.c.o:                 U sqlite3_step
libhangar_internal.a:store_db-postgres.c.o:                 U PQexecParams
libhangar_internal.a:store_store.c.o:                 U db_step
"""


class Symbols(unittest.TestCase):
    def test_engines_alone_pass(self):
        self.assertEqual(layer.check_symbols(NM), [])

    def test_caller_elsewhere_fails(self):
        for obj, sym in (('store_sessions.c.o', 'sqlite3_prepare_v2'), ('store_checkpoints.c.o', 'PQexec'),
                         ('store_db-sqlite.c.o', 'PQclear')):
            nm = NM + 'libhangar_internal.a:%s:                 U %s\n' % (obj, sym)
            problems = layer.check_symbols(nm)
            self.assertEqual(len(problems), 1, obj)
            self.assertIn(obj, problems[0])


if __name__ == '__main__':
    unittest.main()
