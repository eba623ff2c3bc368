"""``moverkit publish``: assemble each metric's Hub Space (module + demo) and upload it."""

from __future__ import annotations

from pathlib import Path


def register(commands) -> None:
    publish = commands.add_parser("publish", help="assemble each metric's Hub Space (module + demo) and upload it")
    publish.add_argument("out", type=Path, help="a new or empty folder to assemble the Spaces in")
    publish.add_argument("--dry-run", action="store_true", help="assemble only, upload nothing")
    publish.add_argument("--org", default="moverkit", help="Hub user or organisation of the Spaces (default: moverkit)")
    publish.add_argument(
        "--repository",
        help="GitHub owner/name the Space cards link to (default: $GITHUB_REPOSITORY, else the origin "
        "remote; a placeholder in a dry run)",
    )
    publish.add_argument(
        "--commit",
        help="full 40-hex commit hash the Space cards link to (default: $GITHUB_SHA, else HEAD; a placeholder in a dry run)",
    )
    publish.add_argument("--tag", help="also tag every Space with this (the release tag)")
    publish.add_argument("--source", type=Path, help="checkout holding metrics/ and spaces/ (default: moverkit's own)")
    publish.set_defaults(run=run)


def run(args) -> int:
    from moverkit.facts.version import __version__
    from moverkit.publish import DRY_RUN_COMMIT, DRY_RUN_REPOSITORY, assemble, find_root, resolve_release, upload

    root = find_root(args.source)
    release = resolve_release(root, args.org, args.repository, args.commit, dry_run=args.dry_run)
    folders = assemble(root, args.out, release)
    for folder in folders:
        files = ", ".join(sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()))
        print(f"{release.space_id(folder.name)}\t{folder}\t{files}")
    if args.dry_run:
        links = f"{release.repository}@{release.commit}"
        if release.repository == DRY_RUN_REPOSITORY or release.commit == DRY_RUN_COMMIT:
            links += " (placeholders where not given and not found)"
        print(
            f"dry run: {len(folders)} Spaces assembled in {args.out}; they install moverkit=={__version__} from PyPI "
            f"and their cards link to {links}"
        )
        print("nothing uploaded")
        return 0
    for space_id in upload(folders, release, tag=args.tag):
        print(f"uploaded https://huggingface.co/spaces/{space_id}")
    return 0
