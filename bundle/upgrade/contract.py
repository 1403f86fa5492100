"""The command-line contract, old parser against new: every difference of the two snapshots, and which of
them the bundle's own command lines or the user's extra_args run into (with the file and line)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from bundle import paths
from bundle.rules import argspec


def _by_flag(spec: dict) -> dict[str, dict]:
    return {flag: option for option in spec["options"] for flag in option["flags"]}


def _by_dest(spec: dict) -> dict[str, dict]:
    return {option["dest"]: option for option in spec["options"]}


def parser_diff(old: dict, new: dict) -> list[dict]:
    """Every difference between two snapshots, one dict per option: kind is removed, renamed, spelling
    (a flag added to an option), added, retyped, choices, or default; `flag` is the option's first old flag (its new one when added)."""
    out = []
    new_flags, new_dests, old_dests = _by_flag(new), _by_dest(new), _by_dest(old)
    for option in old["options"]:
        flag = option["flags"][0]
        gone = [f for f in option["flags"] if f not in new_flags]
        now = new_flags.get(flag) or next((new_flags[f] for f in option["flags"] if f in new_flags), None)
        if now is None:
            moved = new_dests.get(option["dest"])
            if moved is not None:
                out.append({"kind": "renamed", "flag": flag, "to": moved["flags"][0],
                            "what": f"{flag} is now {', '.join(moved['flags'])}"})
            else:
                out.append({"kind": "removed", "flag": flag, "what": f"{flag} was removed"})
            continue
        spelled = [f for f in now["flags"] if f not in option["flags"] and f not in _by_flag(old)]
        if spelled:
            out.append({"kind": "spelling", "flag": flag, "what": f"{flag}: new spelling {', '.join(spelled)}"})
        if gone:
            out.append({"kind": "renamed", "flag": gone[0], "to": now["flags"][0],
                        "what": f"{', '.join(gone)} dropped; {', '.join(now['flags'])} remain"})
        for field in ("action", "type", "nargs"):
            if option.get(field) != now.get(field):
                out.append({"kind": "retyped", "flag": flag, "field": field, "old": option.get(field),
                            "new": now.get(field), "what": f"{flag}: {field} {option.get(field)} -> {now.get(field)}"})
        old_choices, new_choices = option.get("choices"), now.get("choices")
        if old_choices != new_choices and (old_choices or new_choices):
            lost = sorted(set(map(str, old_choices or [])) - set(map(str, new_choices or []))) if new_choices else []
            gained = sorted(set(map(str, new_choices or [])) - set(map(str, old_choices or [])))
            if old_choices and not new_choices:
                what = f"{flag}: any value now (was one of {len(old_choices)} choices)"
            else:
                what = f"{flag}: choices " + "; ".join(
                    p for p in (f"lost {', '.join(lost)}" if lost else "", f"gained {', '.join(gained)}" if gained else "")
                    if p)
            out.append({"kind": "choices", "flag": flag, "lost": lost, "gained": gained, "what": what})
        if "default" in option and "default" in now and option["default"] != now["default"]:
            out.append({"kind": "default", "flag": flag, "dest": option["dest"], "old": option["default"],
                        "new": now["default"], "what": f"{flag}: default {option['default']!r} -> {now['default']!r}"})
    for option in new["options"]:
        if option["dest"] not in old_dests and not any(f in _by_flag(old) for f in option["flags"]):
            out.append({"kind": "added", "flag": option["flags"][0], "what": f"{option['flags'][0]} is new"
                        + (f" (choices {', '.join(map(str, option['choices']))})" if option.get("choices") else "")
                        + (f", default {option['default']!r}" if option.get("default") not in (None, False) else "")})
    return out


# --- where a flag on a rendered command line comes from ----------------------------------------------

def _flag_of(token: str) -> str | None:
    return token.split("=", 1)[0] if token.startswith("--") else None


@lru_cache(maxsize=None)
def _code_files(topology: str) -> tuple[Path, ...]:
    """Where a rendered flag can come from: the topology's compose file, then the driver's code."""
    root = paths.PACKAGE_DIR.parent
    files = [root / "compose" / f"{topology}.yaml", *sorted((root / "bundle").rglob("*.py"))]
    skip = {"upgrade", "simulator"}  # the report's own code and the no-GPU modes' fake server
    return tuple(p for p in files if p.is_file() and not skip & set(p.relative_to(root).parts))


def code_location(flag: str, topology: str) -> str:
    """file:line of the compose file or driver code that writes `flag` onto `topology`'s command lines."""
    root = paths.PACKAGE_DIR.parent
    in_yaml = re.compile(r"(^|\s)" + re.escape(flag) + r"(\s|=|$)")
    in_code = re.compile(r"""["']""" + re.escape(flag) + r"""(?:["'=])""")
    for path in _code_files(topology):
        pattern = in_yaml if path.suffix == ".yaml" else in_code
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and not line.lstrip().startswith("#"):
                return f"{path.relative_to(root)}:{number}"
    return f"compose/{topology}.yaml (rendered)"


def used_flags(dep) -> list[dict]:
    """Every flag on every rendered server and router command line of every topology: {program, flag,
    value, line (the whole argv), origin (file:line), from_config (the user's extra_args)}."""
    from bundle import topology as topologies
    from bundle.render.compose import render

    out = []
    for name in topologies.NAMES:
        entry = topologies.get(name)
        rendered = render(dep, entry, image="bundle-upgrade", lock_hash="upgrade")
        lines = []
        for role in dep.roles(entry):
            args = rendered.server_args(role.name)
            if args is not None:
                lines.append((argspec.SERVER_SPEC, f"{name}/{role.name}", args, role.key_path, list(role.extra_args)))
        router_args = rendered.router_args()
        if router_args is not None:
            section = dep.router(entry)
            lines.append((argspec.ROUTER_SPEC, f"{name}/router", router_args,
                          (*_section_path(dep, entry), "router"), list(section.extra_args) if section else []))
        for program, where, argv, key_path, extra in lines:
            for i, token in enumerate(argv):
                flag = _flag_of(str(token))
                if flag is None:
                    continue
                value = None
                if "=" in str(token):
                    value = str(token).split("=", 1)[1]
                elif i + 1 < len(argv) and not str(argv[i + 1]).startswith("--"):
                    value = str(argv[i + 1])
                origin, from_config = None, False
                for j, extra_token in enumerate(extra):
                    if _flag_of(str(extra_token)) == flag:
                        origin, from_config = dep.source.where((*key_path, "extra_args", j)), True
                        break
                out.append({"program": program, "server": where, "flag": flag, "value": value, "argv": argv,
                            "origin": origin or code_location(flag, name), "from_config": from_config})
    return out


def _section_path(dep, entry) -> tuple[str, ...]:
    return (entry.config_section,)


def affected(diff: list[dict], new_spec: dict, uses: list[dict], program: str) -> tuple[list[dict], list[dict]]:
    """(breaks, attention) on the rendered command lines of `program` under the new parser."""
    breaks, attention = [], []
    by_flag: dict[str, list[dict]] = {}
    for change in diff:
        by_flag.setdefault(change["flag"], []).append(change)
    parser = argspec.parser_from_spec(new_spec)
    seen = set()
    for use in (u for u in uses if u["program"] == program):
        for change in by_flag.get(use["flag"], []):
            key = (use["origin"], change["what"])
            if key in seen:
                continue
            seen.add(key)
            item = {"what": f"{use['server']}: {change['what']}", "where": use["origin"], "flag": use["flag"]}
            if change["kind"] in ("removed", "renamed"):
                breaks.append(item)
            elif change["kind"] == "choices" and use["value"] in change.get("lost", []):
                breaks.append({**item, "what": f"{use['server']}: {use['flag']} {use['value']}: no longer a choice "
                                               f"({change['what']})"})
            elif change["kind"] == "retyped":
                breaks.append(item)
    # The catch-all: the whole line through the new parser (an arity or type change the diff names too).
    for use in {u["server"]: u for u in uses if u["program"] == program}.values():
        try:
            parser.parse_args([str(t) for t in use["argv"]])
        except argspec.ArgumentsRejected as exc:
            if not any(b["what"].startswith(use["server"] + ":") for b in breaks):
                breaks.append({"what": f"{use['server']}: the new parser rejects the command line: {exc}",
                               "where": use["origin"], "flag": None})
    return breaks, attention
