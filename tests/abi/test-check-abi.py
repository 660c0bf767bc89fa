#!/usr/bin/env python3
"""Shows that each check of check-abi.py fails on the fault it guards
against, and passes on well-formed input, so a green ABI test means
something."""
import importlib.util
import os
import sys
import tempfile
import unittest

spec = importlib.util.spec_from_file_location(
    'check_abi', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'check-abi.py'))
abi = importlib.util.module_from_spec(spec)
spec.loader.exec_module(abi)

GOOD_SYM = """/* comment */
HANGAR_0.2 {
global:
\thangar_a;
\thangar_b;
local:
\t*;
};
"""


class ThreeWay(unittest.TestCase):
    def test_agreement_passes(self):
        self.assertEqual(abi.check_three_way({'hangar_a': 'HANGAR_0.2'}, ['hangar_a'], {'hangar_a': 'x.h'}), [])

    def test_export_missing_from_symfile(self):
        p = abi.check_three_way({'hangar_a': '', 'hangar_b': ''}, ['hangar_a'], {'hangar_a': 'x.h'})
        self.assertEqual(p, ['hangar_b: in the library exports, not in libhangar.sym'])

    def test_declared_but_not_in_symfile(self):
        p = abi.check_three_way({'hangar_a': ''}, ['hangar_a'], {'hangar_a': 'x.h', 'hangar_c': 'x.h'})
        self.assertEqual(p, ['hangar_c: in the HANGAR_EXTERN declarations, not in libhangar.sym'])


class SymFile(unittest.TestCase):
    def test_good(self):
        self.assertEqual(abi.check_symfile(abi.parse_symfile(GOOD_SYM)), [])

    def test_unsorted(self):
        p = abi.check_symfile(abi.parse_symfile(GOOD_SYM.replace('hangar_a', 'hangar_z')))
        self.assertTrue(any('must be sorted' in x for x in p), p)

    def test_wrong_node(self):
        p = abi.check_symfile(abi.parse_symfile(GOOD_SYM.replace('HANGAR_0.2', 'HANGAR_1')))
        self.assertTrue(any('not HANGAR_0.2' in x for x in p), p)
        self.assertTrue(any('HANGAR_<major>.<minor>' in x for x in p), p)

    def test_no_local_star(self):
        p = abi.check_symfile(abi.parse_symfile(GOOD_SYM.replace('local:\n\t*;\n', '')))
        self.assertTrue(any('local: *;' in x for x in p), p)

    def test_duplicate_across_nodes(self):
        text = GOOD_SYM.replace('local:\n\t*;\n', '') + 'HANGAR_0.3 {\nglobal:\n\thangar_a;\nlocal: *;\n} HANGAR_0.2;\n'
        p = abi.check_symfile(abi.parse_symfile(text))
        self.assertTrue(any('listed in both' in x for x in p), p)

    def test_pattern(self):
        p = abi.check_symfile(abi.parse_symfile(GOOD_SYM.replace('hangar_b', 'hangar_*')))
        self.assertTrue(any('pattern' in x for x in p), p)

    def test_empty(self):
        with self.assertRaises(ValueError):
            abi.parse_symfile('/* nothing */')


class Versions(unittest.TestCase):
    def test_wrong_version(self):
        nodes = abi.parse_symfile(GOOD_SYM)
        self.assertEqual(abi.check_versions({'hangar_a': 'HANGAR_0.2'}, nodes), [])
        self.assertEqual(len(abi.check_versions({'hangar_a': ''}, nodes)), 1)


class Headers(unittest.TestCase):
    def write(self, text):
        fd, path = tempfile.mkstemp(suffix='.h')
        with os.fdopen(fd, 'w') as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def test_parses_declarations(self):
        path = self.write('#define HANGAR_EXTERN(type) extern type\n'
                          '/** HANGAR_EXTERN(int) hangar_in_comment(void); */\n'
                          'HANGAR_EXTERN(const char *) hangar_x(void);\n'
                          'HANGAR_EXTERN(int) hangar_y(int a,\n   int b)\n  __attribute__((x));\n')
        decls, problems = abi.read_header_decls([path])
        self.assertEqual(sorted(decls), ['hangar_x', 'hangar_y'])
        self.assertEqual(problems, [])

    def test_unparsed_use_is_reported(self):
        path = self.write('HANGAR_EXTERN(int (*)(void)) hangar_fp(void);\n')
        decls, problems = abi.read_header_decls([path])
        self.assertEqual(len(problems), 1, problems)


class Man(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def put(self, name, text):
        with open(os.path.join(self.dir.name, name), 'w') as f:
            f.write(text)

    def test_pages(self):
        self.put('meson.build', "install_man('hangar_a.3', 'hangar_b.3', 'hangar_c.3')\n")
        self.put('hangar_a.3', '.TH HANGAR_A 3\n')
        self.put('hangar_b.3', '.so man3/hangar_a.3\n')
        self.assertEqual(abi.check_man({'hangar_a', 'hangar_b'}, self.dir.name), [])
        p = abi.check_man({'hangar_a', 'hangar_b', 'hangar_d'}, self.dir.name)
        self.assertEqual(p, ['hangar_d: no man page man/hangar_d.3'])
        self.put('hangar_c.3', '.so man3/hangar_missing.3\n')
        p = abi.check_man({'hangar_c'}, self.dir.name)
        self.assertTrue(p and 'does not exist' in p[0], p)
        self.put('hangar_e.3', '.TH HANGAR_E 3\n')
        p = abi.check_man({'hangar_e'}, self.dir.name)
        self.assertTrue(p and 'not installed' in p[0], p)


class SonameAndForeign(unittest.TestCase):
    def test_soname(self):
        self.assertEqual(abi.check_soname(abi.SONAME), [])
        self.assertEqual(len(abi.check_soname('libhangar.so.0')), 1)
        self.assertEqual(len(abi.check_soname(None)), 1)

    def test_foreign(self):
        self.assertEqual(abi.check_foreign({'hangar_a': 'HANGAR_0.2'}, {'HANGAR_0.2'}), [])
        self.assertEqual(len(abi.check_foreign({'hangar_a': '', 'cJSON_Parse': ''}, set())), 1)
        self.assertEqual(len(abi.check_foreign({}, {'LIBFOO_1'})), 1)


if __name__ == '__main__':
    unittest.main(verbosity=2)
