"""Writes a `docker save`-format image archive that containerd imports
(ctr images import): manifest.json, a config whose rootfs.diff_ids are the
sha256 of each uncompressed layer tar, and the layers.

    mkimage.py OUT.tar TAG CONFIG.json LAYER.tar [FILE=PATH_IN_IMAGE[:MODE]]...

FILE=... entries go into one more layer, owned by root.
"""
import hashlib, io, json, os, sys, tarfile

out, tag, config_path, base = sys.argv[1:5]
extra = sys.argv[5:]
layers = [base]
if extra:
    extra_path = out + ".extra.tar"
    with tarfile.open(extra_path, "w") as t:
        dirs = set()
        for e in extra:
            src, dst = e.split("=", 1)
            mode = 0o755
            if ":" in dst:
                dst, m = dst.rsplit(":", 1)
                mode = int(m, 8)
            dst = dst.lstrip("/")
            parts = dst.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    ti = tarfile.TarInfo(d)
                    ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                    t.addfile(ti)
            ti = t.gettarinfo(src, dst)
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            ti.mode = mode
            with open(src, "rb") as f:
                t.addfile(ti, f)
    layers.append(extra_path)

def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()

cfg = json.load(open(config_path))
ids = [sha(l) for l in layers]
image = {"architecture": "amd64", "os": "linux", "config": cfg,
         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + i for i in ids]}}
blob = json.dumps(image).encode()
cfg_name = hashlib.sha256(blob).hexdigest() + ".json"
with tarfile.open(out, "w") as t:
    def add_bytes(name, data):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    add_bytes(cfg_name, blob)
    names = []
    for l, i in zip(layers, ids):
        names.append(i + "/layer.tar")
        t.add(l, arcname=names[-1])
    add_bytes("manifest.json", json.dumps([{"Config": cfg_name, "RepoTags": [tag], "Layers": names}]).encode())
if extra:
    os.remove(extra_path)
