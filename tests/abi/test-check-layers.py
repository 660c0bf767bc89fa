#!/usr/bin/env python3
"""Shows that each check of check-layers.py fails on the fault it guards
against, and passes on a tree that keeps the order."""
import importlib.util
import os
import tempfile
import unittest

spec = importlib.util.spec_from_file_location(
    'check_layers', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'check-layers.py'))
layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layers)

DOC = '''.SH LAYERS
.\\" layers:begin
.nf
util   helpers
core   the context
store/envd   peers
sandbox   on top
.fi
.\\" layers:end
.\\" providers-may-use: util
'''

GOOD = {
    'include/hangar/hangar.h': '/* public */\n',
    'libhangar/util/buf.h': '/* buffers */\n',
    'libhangar/core/internal.h': '#include "hangar/hangar.h"\n#include "util/buf.h"\n',
    'libhangar/core/context.h': '/* The layout: private to libhangar/core. */\n#include "internal.h"\n',
    'libhangar/core/context.c': '#include "context.h"\n',
    'libhangar/store/store.h': '#include "core/internal.h"\n',
    'libhangar/envd/client.h': '#include "util/buf.h"\n',
    'libhangar/sandbox/sandbox.c': '#include "store/store.h"\n#include "envd/client.h"\n#include "version.h"\n',
    'libhangar/providers/local/local.c': '#include "hangar/hangar.h"\n#include "util/buf.h"\n#include "lstate.h"\n',
    'libhangar/providers/local/lstate.h': '/* own */\n',
    'libhangar/modules.c': '#include "sandbox/sandbox.h"\n#include "store/store.h"\n',
    'libhangar/sandbox/sandbox.h': '#include "core/internal.h"\n',
}


def run(extra=None, drop=()):
    files = dict(GOOD)
    files.update(extra or {})
    for d in drop:
        files.pop(d)
    with tempfile.TemporaryDirectory() as d:
        for rel, text in files.items():
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(text)
        ranks, helpers = layers.read_order(DOC)
        return layers.check(d, ranks, helpers)


class Order(unittest.TestCase):
    def test_reads_the_document(self):
        ranks, helpers = layers.read_order(DOC)
        self.assertEqual(ranks, {'util': 0, 'core': 1, 'store': 2, 'envd': 2, 'sandbox': 3})
        self.assertEqual(helpers, ['util'])

    def test_good_tree_passes(self):
        self.assertEqual(run(), [])

    def test_upward_include_fails(self):
        p = run({'libhangar/store/lease.c': '#include "sandbox/sandbox.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('sandbox is above store', p[0])

    def test_core_naming_a_layer_above_fails(self):
        p = run({'libhangar/core/settings.c': '#include "store/store.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('above core', p[0])

    def test_peers_fail(self):
        p = run({'libhangar/store/x.c': '#include "envd/client.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('peers', p[0])

    def test_layer_not_in_the_order_fails(self):
        p = run({'libhangar/cache/cache.c': '#include "core/internal.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('not in the documented order', p[0])


class Providers(unittest.TestCase):
    def test_provider_reaching_core_fails(self):
        p = run({'libhangar/providers/local/usage.c': '#include "core/internal.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('providers use only the public API', p[0])

    def test_provider_using_a_layer_not_lent_fails(self):
        p = run({'libhangar/providers/e2b/api.c': '#include "envd/client.h"\n'})
        self.assertEqual(len(p), 1)


class Private(unittest.TestCase):
    def test_private_header_outside_its_layer_fails(self):
        p = run({'libhangar/sandbox/x.c': '#include "core/context.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('private to libhangar/core', p[0])


class Style(unittest.TestCase):
    def test_dotdot_fails(self):
        p = run({'libhangar/sandbox/x.c': '#include "../store/store.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('not with ../', p[0])

    def test_bare_name_of_another_dir_fails(self):
        p = run({'libhangar/store/y.c': '#include "buf.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('"util/buf.h"', p[0])

    def test_public_header_by_bare_name_fails(self):
        p = run({'libhangar/store/y.c': '#include "hangar.h"\n'})
        self.assertEqual(len(p), 1)

    def test_unknown_file_fails(self):
        p = run({'libhangar/store/y.c': '#include "store/nothere.h"\n'})
        self.assertEqual(len(p), 1)
        self.assertIn('names no file', p[0])


if __name__ == '__main__':
    unittest.main()
