#!/usr/bin/env python3
"""Shows that each check of check-http-layer.py fails on the fault it
guards against, and passes on a tree that keeps libcurl inside net/."""
import importlib.util
import os
import tempfile
import unittest

spec = importlib.util.spec_from_file_location(
    'check_http_layer', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'check-http-layer.py'))
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
    def test_net_alone_passes(self):
        with tree({'libhangar/net/net.c': '#include <curl/curl.h>\n',
                   'libhangar/net/net.h': '/* nothing else includes <curl/curl.h> */\n',
                   'libhangar/envd/client.c': '#include "net/net.h"\n',
                   'tests/e2b/test.c': '#include <curl/curl.h>\n'}) as d:
            self.assertEqual(layer.check_includes(d), [])

    def test_only_the_named_tls_transport_is_let_through(self):
        with tree({'programs/hangard/e2b-edge-tls.c': '#include <curl/curl.h>\n',
                   'programs/hangard/e2b-edge.c': '#include <curl/curl.h>\n'}) as d:
            problems = layer.check_includes(d)
            self.assertEqual(len(problems), 1)
            self.assertIn('programs/hangard/e2b-edge.c:1', problems[0])

    def test_include_elsewhere_fails(self):
        for rel, line in (('libhangar/checkpoint/s3http.c', '#include <curl/curl.h>'),
                          ('libhangar/providers/e2b/api.c', '  #  include "curl/easy.h"'),
                          ('programs/hangard/main.c', '#include <curl/curl.h>'),
                          ('libhangar/network/x.h', '#include <curl/curl.h>')):
            with tree({rel: '/* x */\n' + line + '\n'}) as d:
                problems = layer.check_includes(d)
                self.assertEqual(len(problems), 1, rel)
                self.assertIn(rel + ':2', problems[0])


NM = """libhangar_internal.a:net_net.c.o:                 U curl_easy_init
libhangar_internal.a:net_net.c.o:                 U curl_easy_perform
libhangar_internal.a:envd_client.c.o:                 U net_perform
"""


class Symbols(unittest.TestCase):
    def test_net_alone_passes(self):
        self.assertEqual(layer.check_symbols(NM), [])
        self.assertEqual(list(layer.curl_users(NM)), ['net_net.c.o'])

    def test_caller_elsewhere_fails(self):
        nm = NM + 'libhangar_internal.a:checkpoint_s3http.c.o:                 U curl_easy_setopt\n'
        problems = layer.check_symbols(nm)
        self.assertEqual(len(problems), 1)
        self.assertIn('checkpoint_s3http.c.o', problems[0])

    def test_lookalike_object_fails(self):
        for obj in ('subnet_net.c.o', 'providers_net_net.c.o'):
            nm = 'a.a:a.a.p/%s:                 U curl_easy_init\n' % obj
            self.assertEqual(len(layer.check_symbols(nm)), 1, obj)


if __name__ == '__main__':
    unittest.main()
