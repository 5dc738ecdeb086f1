"""A PEP 517 build backend for rlm-client, standard library only.

rlm-client has no dependencies, and its build should have none either:
PyPI may be unreachable (an air-gapped host, a CI runner without a
network), and setuptools cannot build a wheel without the separate wheel
package on older interpreters. So this module builds the wheel itself: a
zip of the rlm_client package with the METADATA, WHEEL and RECORD files
PEP 427 asks for. It reads the little it needs from pyproject.toml's
[project] table (name, version, description, requires-python) with
tomllib where there is one, else with a line reader that understands
exactly the simple `key = "value"` lines that table uses.
"""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "rlm_client"


def _project():
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib  # Python 3.11+

        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    project, section = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
                continue
            if section == "[project]" and "=" in line:
                key, _, value = line.partition("=")
                value = value.strip()
                if value.startswith('"') and value.endswith('"'):
                    project[key.strip()] = value[1:-1]
    return project


def _dist_name(project):
    return project["name"].replace("-", "_")


def _metadata(project):
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + project["name"],
        "Version: " + project["version"],
        "Summary: " + project.get("description", ""),
    ]
    if project.get("requires-python"):
        lines.append("Requires-Python: " + project["requires-python"])
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _files():
    """The package's files, as (path in the wheel, path on disk)."""
    out = []
    base = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".typed")):
                full = os.path.join(dirpath, name)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _write_wheel(wheel_directory, entries):
    """Writes a wheel of entries ((path, bytes)) plus its dist-info."""
    project = _project()
    dist = _dist_name(project)
    info = "%s-%s.dist-info" % (dist, project["version"])
    entries = list(entries) + [
        (info + "/METADATA", _metadata(project).encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: rlm_client_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = "".join("%s,%s,%d\n" % (p, _record_hash(d), len(d)) for p, d in entries)
    record += info + "/RECORD,,\n"
    name = "%s-%s-py3-none-any.whl" % (dist, project["version"])
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in entries:
            z.writestr(p, d)
        z.writestr(info + "/RECORD", record)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(p, _read(f)) for p, f in _files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # PEP 660: a .pth file that puts this directory on sys.path.
    return _write_wheel(wheel_directory, [("rlm_client_editable.pth", (ROOT + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        info = _metadata(project).encode("utf-8")
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(info)
        t.addfile(ti, io.BytesIO(info))
        for rel in ["pyproject.toml", "README.md", "_backend/rlm_client_build.py"] + [p for p, _ in _files()]:
            t.add(os.path.join(ROOT, rel), arcname=base + "/" + rel)
    return name
