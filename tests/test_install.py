"""crashmatrix installed beside a team's project that has its own ``harness`` and ``reports``
packages: the team's suite keeps collecting and passing, and crashmatrix still works.

A scratch virtual environment gets crashmatrix from this checkout (a real wheel, and an
editable install), built offline with this environment's setuptools; its dependencies come
from this environment's site-packages through a ``.pth`` line (no download, no second copy).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

# A team's project: top-level packages named like crashmatrix's folders, imported by its tests.
PROJECT = {
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    "harness/__init__.py": "HARNESS = 'the team harness'\n",
    "reports/__init__.py": "from .weekly import WEEKLY\n",
    "reports/weekly.py": "WEEKLY = 'the team report'\n",
    "tests/test_own.py": (
        "from harness import HARNESS\n"
        "from reports import WEEKLY\n\n\n"
        "def test_the_teams_own_packages_are_the_ones_imported():\n"
        "    assert HARNESS == 'the team harness'\n"
        "    assert WEEKLY == 'the team report'\n"
    ),
    # A folder named scenarios/ with a YAML that is not a scenario of ours must not break
    # the team's own test run when the team does not ask for it.
    "config/app.yaml": "name: app\n",
}


def _scratch_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # This environment's packages as plain path entries, after the scratch site-packages:
    # its own .pth files (this checkout's editable install among them) are not processed.
    (site / "zz-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    # pytest's console script, as an install of pytest would write it: unlike ``python -m
    # pytest``, it does not put the working directory on sys.path.
    script = where / "bin" / "pytest"
    script.write_text(
        f"#!{python}\nimport sys\nimport pytest\nsys.exit(pytest.main())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return python


def _install(python: Path, *, editable: bool) -> None:
    command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    command += ["--no-deps", "--no-build-isolation", "--no-index"]
    command += ["-e", str(ROOT)] if editable else [str(ROOT)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("editable", [False, True], ids=["wheel", "editable"])
def test_a_team_project_with_its_own_harness_and_reports_packages_keeps_working(
    tmp_path: Path, editable: bool
) -> None:
    python = _scratch_venv(tmp_path / "venv")
    _install(python, editable=editable)
    project = tmp_path / "project"
    for name, text in PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text, encoding="utf-8")
    run = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "pytest"), "tests", "-p", "no:cacheprovider", "-q"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    # The plugin was there all along (its options are offered), yet it loaded nothing of
    # crashmatrix beyond its own light module.
    help_text = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "pytest"), "--help"], cwd=project, capture_output=True, text=True
    ).stdout
    assert "--case-deadline" in help_text
    # And crashmatrix itself works from the scratch environment, wherever it stands.
    check = subprocess.run(
        [str(python), "-m", "crashmatrix.harness.front.cli", "validate", str(ROOT / "scenarios")],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    cli = subprocess.run(
        [
            str(tmp_path / "venv" / "bin" / "crashmatrix"),
            "points",
            str(ROOT / "scenarios/send_email/send_once.yaml"),
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "after_running[" in cli.stdout
