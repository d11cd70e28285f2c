"""The builds a bisect searches, in commit order: git commits as worktrees, a listed set of variants, or released versions.

A commit's worktree path fills the template variant's `{worktree}` (SGLang: `env: {PYTHONPATH: "{worktree}/python"}`,
no build step). A build whose build command fails, or a version pip cannot install, is skipped, never called bad.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ValidationError

from evalctl.config_files import read_yaml
from evalctl.errors import BuildInputError
from evalctl.schema import Variant

WORKTREE = "{worktree}"


class Build(BaseModel):
    """One build in commit order: its variant (with `{worktree}` filled in) and its origin."""

    name: str
    variant: Variant
    revision: str | None = None
    subject: str | None = None
    worktree: Path | None = None
    built: bool | None = None  # None: not built yet (or no build command)
    build_log: Path | None = None

    @property
    def label(self) -> str:
        return f"{self.revision[:10]} {self.subject or ''}".strip() if self.revision else self.name


def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise BuildInputError(f"cannot run git: {exc}") from None
    if done.returncode != 0:
        raise BuildInputError(f"git {' '.join(args)} in {repo} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _revision(repo: Path, rev: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
    except BuildInputError:
        raise BuildInputError(f"{rev!r} is not a commit in {repo}") from None


def commits(repo: Path, good: str, bad: str, all_commits: bool = False) -> list[tuple[str, str]]:
    """(sha, subject) from good to bad inclusive, in commit order (first-parent unless `all_commits`); BuildInputError
    unless good is an ancestor of bad."""
    if not repo.is_dir():
        raise BuildInputError(f"--repo {repo} is not a directory")
    _git(repo, "rev-parse", "--git-dir")
    good_sha, bad_sha = (_revision(repo, rev) for rev in (good, bad))
    path = ["--ancestry-path"] + ([] if all_commits else ["--first-parent"])
    lines = _git(repo, "rev-list", "--reverse", *path, "--format=%H %s", f"{good_sha}..{bad_sha}").splitlines()
    found = [line.partition(" ")[::2] for line in lines if not line.startswith("commit ")]
    if not found or found[-1][0] != bad_sha:
        raise BuildInputError(f"{good} is not an ancestor of {bad} (no commit path between them; --find fix takes --good as the newer)")
    return [(good_sha, _git(repo, "log", "-1", "--format=%s", good_sha).strip()), *found]


def filled(template: Variant, worktree: Path, revision: str | None) -> Variant:
    """`template` with `{worktree}` replaced in its interpreter, prefix, arguments and environment."""
    path = str(worktree)

    def sub(text: str) -> str:
        return text.replace(WORKTREE, path)

    return template.model_copy(
        update={
            "python": sub(template.python) if template.python else None,
            "command_prefix": [sub(x) for x in template.command_prefix],
            "extra_args": [sub(x) for x in template.extra_args],
            "env": {k: sub(v) for k, v in template.env.items()},
            "git_revision": revision,
        }
    )


def git_builds(repo: Path, good: str, bad: str, template: Variant, worktrees: Path, all_commits: bool = False) -> list[Build]:
    """One build per commit good..bad; worktrees are made later, when a build is first tested (`checkout`)."""
    return [
        Build(
            name=sha[:10], revision=sha, subject=subject, worktree=worktrees / sha[:12], variant=filled(template, worktrees / sha[:12], sha)
        )
        for sha, subject in commits(repo.resolve(), good, bad, all_commits)
    ]


def checkout(repo: Path, build: Build) -> None:
    """The build's detached worktree, made once (an existing one is kept)."""
    if build.worktree is None or (build.worktree / ".git").exists():
        return
    build.worktree.parent.mkdir(parents=True, exist_ok=True)
    _git(repo, "worktree", "add", "--detach", "--force", str(build.worktree), str(build.revision))


def run_build(build: Build, command: str, logs: Path) -> bool:
    """Run `command` in the build's worktree (a shell), its output to logs/<name>.log; True if it succeeded (run once)."""
    if build.built is not None:
        return build.built
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{build.name}.log"
    with log.open("w") as out:
        done = subprocess.run(command, shell=True, cwd=build.worktree, stdout=out, stderr=subprocess.STDOUT, check=False)
        out.write(f"\n[evalctl bisect] build command exited {done.returncode}\n")
    build.built, build.build_log = done.returncode == 0, log
    return build.built


def _check_listed(source: str, names: list[str], what: str, named: str) -> None:
    if len(names) < 3:
        raise BuildInputError(f"{source} lists {len(names)} {what}: need the good one, the bad one and one between")
    if len(set(names)) != len(names):
        raise BuildInputError(f"{source}: {named} repeat")


class _BuildList(BaseModel):
    builds: list[Variant]


def listed_builds(path: Path) -> list[Build]:
    """Builds from a YAML file: `builds:` (or a bare list) of variants, oldest first."""
    data = read_yaml(path, "builds file", BuildInputError, mapping=False)
    try:
        variants = _BuildList.model_validate({"builds": data} if isinstance(data, list) else data).builds
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise BuildInputError(f"invalid builds file {path}: {where}") from None
    _check_listed(f"builds file {path}", [v.name for v in variants], "builds", "build names")
    return [Build(name=v.name, variant=v, revision=v.git_revision) for v in variants]


def version_builds(spec: str, template: Variant) -> list[Build]:
    """One build per released version of `PACKAGE==V1,V2,...` (oldest first): the template served from `pip: PACKAGE==V`."""
    package, sep, listed = spec.partition("==")
    versions = [v.strip() for v in listed.split(",") if v.strip()]
    if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", package.strip()):
        raise BuildInputError(f"--builds {spec!r}: not a builds file, nor PACKAGE==V1,V2,... (e.g. xllamacpp==0.2.13,0.2.14,2026.5.9294)")
    for version in versions:
        try:
            Version(version)
        except InvalidVersion:
            raise BuildInputError(f"--builds {spec!r}: {version!r} is not a version") from None
    _check_listed(f"--builds {spec!r}", versions, "versions", "versions")
    name = canonicalize_name(package)
    # The template's other requirements (an engine's companions, e.g. a pinned torch) stay with each version.
    others = [r for r in template.pip or [] if canonicalize_name(Requirement(r).name) != name]
    base = template.model_copy(update={"python": None, "command_prefix": [], "git_revision": None})
    return [Build(name=v, variant=base.model_copy(update={"pip": [*others, f"{package.strip()}=={v}"]})) for v in versions]
