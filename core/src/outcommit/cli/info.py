"""``outcommit plugins``, ``config``, ``capabilities`` and ``check``: what is installed, the
configuration keys, and what a store guarantees, before any job runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..plugins import get_registry
from ..redaction import scrub
from .common import conf_option, conf_pairs, print_json, subparser

EXAMPLES = {
    "plugins": "  outcommit plugins\n  outcommit plugins --json | jq '.[].schemes'",
    "config": "  outcommit config\n  outcommit config --json\n  outcommit config --write-docs docs",
    "capabilities": "  outcommit capabilities s3://bucket/table --conf outcommit.s3.region=eu-west-1\n"
                    "  outcommit capabilities gs://bucket/table --json",
    "check": "  outcommit check s3://bucket/events --conf fs.s3a.endpoint=http://127.0.0.1:9000\n"
             "  outcommit check abfs://data/events --json\n"
             "  outcommit check gs://bucket/events --full --committer manifest",
}


def cmd_plugins(args: argparse.Namespace) -> int:
    registry = get_registry()
    plugins = registry.plugins()
    if args.json:
        print_json([vars(p) for p in plugins])
        return 0
    stores = registry.stores()
    committers = registry.committers()
    print(f"{'plugin':<12} {'distribution':<18} {'version':<9} schemes / committers")
    for p in plugins:
        things = []
        if p.schemes:
            things.append("schemes: " + ", ".join(
                f"{s} (default {stores[s].default_committer})" for s in p.schemes))
        if p.committers:
            things.append("committers: " + ", ".join(p.committers))
        if p.error:
            things.append(f"ERROR: {p.error}")
        print(f"{p.name:<12} {p.distribution or '-':<18} {p.version or '-':<9} {'; '.join(things) or '-'}")
    print()
    for name, spec in sorted(committers.items()):
        print(f"  {name:<12} {spec.description}")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from ..keys import catalogue, markdown_table

    if args.write_docs:
        from pathlib import Path

        from ..docsgen import generated_sections, render

        for name, section, body in generated_sections():
            doc = Path(args.write_docs) / name
            doc.write_text(render(doc.read_text(), section, body))
            print(f"updated {doc} ({section})")
        return 0
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    infos = catalogue()
    if args.json:
        print_json([vars(i) | {"aliases": list(i.aliases)} for i in infos])
        return 0
    for info in infos:
        aliases = f"  (also {', '.join(info.aliases)})" if info.aliases else ""
        print(f"{info.key}{aliases}\n    [{info.plugin}] {info.description}")
    return 0


def cmd_capabilities(args: argparse.Namespace) -> int:
    from ..factory import describe_capabilities

    info = describe_capabilities(args.url, conf_pairs(args.conf))
    if args.json:
        print_json(info)
        return 0
    print(f"{info['url']}  store {info['store']} (plugin {info['plugin']})")
    for name, present in info["capabilities"].items():
        print(f"  {'yes' if present else 'no ':<4} {name}")
    print(f"default committer: {info['default_committer']}")
    print(f"safe committers:   {', '.join(info['safe_committers']) or 'none'}")
    for name, c in info["committers"].items():
        if c["missing"]:
            print(f"  {name}: unsafe here, store lacks {', '.join(c['missing'])}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """``outcommit check URL [--full]``: one line per check; exit 1 when any failed."""
    from ..check import check
    from ..checksuites import run_suites, suites_to_run

    config = conf_pairs(args.conf)
    lines = check(args.url, config)
    report = ""
    if args.full and all(line.ok for line in lines):
        committers = suites_to_run(args.url, config, args.committer or ())
        suites, report = run_suites(args.url, config, committers)
        lines += suites
    ok = all(line.ok for line in lines)
    if args.json:
        print_json({"url": args.url, "ok": ok, "checks": [line.to_dict() for line in lines]})
    else:
        width, result_width = (max(len(getattr(line, f)) for line in lines) for f in ("check", "result"))
        for line in lines:
            print(scrub(line.text(width, result_width)))
        if report and not ok:  # pytest's own account of what failed, for the plugin's author
            print(scrub(report), file=sys.stderr)
    return 0 if ok else 1


def add_parsers(sub: Any) -> None:
    """The parsers of ``plugins``, ``config``, ``capabilities``, ``check``."""
    p = subparser(sub, "plugins", EXAMPLES["plugins"], "installed plugins, versions, schemes and committers")
    p.set_defaults(func=cmd_plugins)

    p = subparser(sub, "config", EXAMPLES["config"], "every configuration key the installed plugins read")
    p.add_argument("--markdown", action="store_true", help="the table of docs/configuration.md")
    p.add_argument("--write-docs", metavar="DOCS_DIR",
                   help="regenerate the key and option tables in DOCS_DIR/*.md")
    p.set_defaults(func=cmd_config)

    p = subparser(sub, "capabilities", EXAMPLES["capabilities"],
                  "what a store guarantees and which committers are safe")
    p.add_argument("url", help="a destination URL (the store is asked, nothing is written)")
    conf_option(p)
    p.set_defaults(func=cmd_capabilities)

    p = subparser(sub, "check", EXAMPLES["check"],
                  "check a store before a job: endpoint, credentials, bucket, "
                  "capabilities (probed), committer; --full: the test suites there")
    p.add_argument("url", help="a destination URL (probes write under <url>/_outcommit_check_<id>/, "
                               "removed after)")
    p.add_argument("--full", action="store_true",
                   help="also run the store contract and the committer conformance suites against "
                        "the store (needs pytest: outcommit[testing]); minutes on a remote store")
    p.add_argument("--committer", action="append", metavar="NAME",
                   help="--full: the committers whose conformance runs (repeatable; default: every "
                        "committer safe on the store)")
    conf_option(p)
    p.set_defaults(func=cmd_check)
