# The part of an rlm sandbox that runs inside it: installed once into a
# session's Python REPL as __rlm_sandbox (see sandbox.go), it starts and
# watches the sandbox's commands and does its file operations, so they run
# under the REPL's own isolation (its namespaces, cgroup, seccomp and user)
# and see the same working directory. Each call is one cell that prints one
# line: MARK, then JSON {"ok": value} or {"error": {"kind", "message"}}.
# Python 3.8+; only the standard library.


HOME_ALIAS = "/home/user"


def _sweep_spools(tmp, me):
    """Remove the spools in tmp of REPLs that are gone."""
    import os, shutil

    try:
        names = os.listdir(tmp)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) != 4 or parts[:2] != ["rlm", "sandbox"] or not parts[2].isdigit():
            continue
        pid = int(parts[2])
        if pid == me:
            continue
        try:
            os.kill(pid, 0)
            continue  # alive (or another user's, which we could not remove anyway)
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(os.path.join(tmp, name), True)


class _RlmSandbox:
    MARK = "\x1erlm-sandbox "

    def __init__(self, ns):
        import os, tempfile

        self.root = os.path.realpath(os.getcwd())
        # the name commands know the workspace by: /home/user, E2B's home,
        # where the sandbox links it there (internal/sandbox/isolate's
        # HomeAlias), else its own path
        self.home = self.root
        if os.path.realpath(HOME_ALIAS) == self.root:
            self.home = HOME_ALIAS
        # command output is spooled here, outside the workspace the user
        # lists and snapshots; the name carries the REPL's pid
        self.spool = tempfile.mkdtemp(prefix="rlm-sandbox-%d-" % os.getpid())
        # Under namespace isolation /tmp is the sandbox's own; at process
        # or none it is the host's, so the spool goes when the REPL does,
        # and the spools of REPLs that were killed (a closed session's is:
        # no atexit runs) go when the next helper starts.
        import atexit, shutil

        atexit.register(shutil.rmtree, self.spool, True)
        _sweep_spools(tempfile.gettempdir(), os.getpid())
        self.procs = {}
        self.contexts = {}
        self.ns = ns
        # the REPL's own cell runner (plugins/internal/pycell), reached
        # through a helper it installed, so a context's cell gives its final
        # expression's value exactly as a session cell does
        helper = ns.get("llm_query")
        self.cell_run = getattr(helper, "__globals__", {}).get("_rlm_cell_run")
        self.cells = 0

    def call(self, req):
        import json, sys

        try:
            req = json.loads(req)
            op = getattr(self, "op_" + req.pop("op"))
            resp = {"ok": op(**req)}
        except FileNotFoundError as e:
            resp = {"error": {"kind": "not_found", "message": self._msg(e)}}
        except FileExistsError as e:
            resp = {"error": {"kind": "exists", "message": self._msg(e)}}
        except (NotADirectoryError, IsADirectoryError) as e:
            resp = {"error": {"kind": "invalid", "message": self._msg(e)}}
        except _Outside as e:
            resp = {"error": {"kind": "outside", "message": str(e)}}
        except _NoProcess as e:
            resp = {"error": {"kind": "no_process", "message": str(e)}}
        except PermissionError as e:
            resp = {"error": {"kind": "permission", "message": self._msg(e)}}
        except OSError as e:
            resp = {"error": {"kind": "os", "message": self._msg(e)}}
        except Exception as e:
            resp = {"error": {"kind": "invalid", "message": "%s: %s" % (type(e).__name__, e)}}
        sys.stdout.write(self.MARK + json.dumps(resp) + "\n")
        sys.stdout.flush()

    def _msg(self, e):
        text = e.strerror or str(e)
        name = e.filename
        if name:
            return "%s: %s" % (self._rel(name), text)
        return text

    def _rel(self, full):
        import os

        if full == self.root:
            return "."
        if full.startswith(self.root + os.sep):
            return full[len(self.root) + 1 :]
        return full

    def path(self, rel):
        """The absolute path of rel (relative to the workspace), refusing
        one that leads out of the workspace through a symlink."""
        import os

        full = os.path.realpath(os.path.join(self.root, rel))
        if full != self.root and not full.startswith(self.root + os.sep):
            raise _Outside("path %r leads out of the workspace (through a symbolic link); only the workspace is reachable" % rel)
        return full

    # commands ---------------------------------------------------------

    def op_start(self, cmd, args, cwd, envs, tag=""):
        import os, subprocess

        self.path(cwd)  # refuses one that leads out
        wd = self.home if cwd == "." else os.path.join(self.home, cwd)
        env = dict(os.environ)
        env["HOME"] = self.home
        env["PWD"] = wd
        env.update(envs or {})
        n = len(self.procs) + 1
        out = os.path.join(self.spool, "%d.out" % n)
        err = os.path.join(self.spool, "%d.err" % n)
        with open(out, "wb") as fo, open(err, "wb") as fe:
            p = subprocess.Popen(
                [cmd] + list(args), cwd=wd, env=env, stdin=subprocess.DEVNULL,
                stdout=fo, stderr=fe, start_new_session=True,
            )
        self.procs[p.pid] = {"p": p, "out": out, "err": err, "cmd": cmd, "args": list(args),
                             "cwd": cwd, "envs": envs or {}, "tag": tag}
        return {"pid": p.pid}

    def _proc(self, pid):
        r = self.procs.get(pid)
        if r is None:
            raise _NoProcess("no process %d in this sandbox (it ended, or was never started here)" % pid)
        return r

    def op_poll(self, pid, out_off, err_off, limit):
        import base64

        r = self._proc(pid)
        code = r["p"].poll()  # before reading: output written before exit is read
        res = {"exited": code is not None}
        for key, off in (("out", out_off), ("err", err_off)):
            with open(r[key], "rb") as f:
                f.seek(off)
                data = f.read(limit)
            res[key] = base64.b64encode(data).decode("ascii")
            if len(data) == limit:
                res["exited"] = False  # more to read first
        if res["exited"]:
            res["exit_code"] = code
        return res

    def op_forget(self, pid):
        import os

        r = self.procs.pop(pid, None)
        if r is not None:
            for key in ("out", "err"):
                try:
                    os.unlink(r[key])
                except OSError:
                    pass
        return None

    def op_signal(self, pid, sig):
        import os, signal

        sig = int(sig) if sig.isdigit() else int(getattr(signal, sig))
        r = self._proc(pid)
        if r["p"].poll() is not None:
            raise _NoProcess("process %d has already ended" % pid)
        try:
            os.killpg(pid, sig)  # the command and what it started
        except ProcessLookupError:
            os.kill(pid, sig)
        return None

    def op_list(self):
        out = []
        for pid, r in sorted(self.procs.items()):
            if r["p"].poll() is None:
                out.append({"pid": pid, "cmd": r["cmd"], "args": r["args"], "cwd": r["cwd"],
                            "envs": r["envs"], "tag": r["tag"]})
        return out

    # files ------------------------------------------------------------

    def _entry(self, full):
        import os, stat

        st = os.lstat(full)
        kind = "file"
        target = ""
        if stat.S_ISDIR(st.st_mode):
            kind = "dir"
        elif stat.S_ISLNK(st.st_mode):
            kind = "symlink"
            target = os.readlink(full)
        return {"name": os.path.basename(full) if full != self.root else "", "path": self._rel(full),
                "type": kind, "size": st.st_size, "mode": stat.S_IMODE(st.st_mode),
                "mtime": st.st_mtime, "target": target}

    def op_stat(self, path):
        return self._entry(self.path(path))

    def op_listdir(self, path, depth=1):
        import os

        top = self.path(path)
        if not os.path.isdir(top):
            raise NotADirectoryError(20, "not a directory", top)
        out = []

        def walk(d, level):
            for name in sorted(os.listdir(d)):
                full = os.path.join(d, name)
                e = self._entry(full)
                out.append(e)
                if e["type"] == "dir" and level < depth:
                    walk(full, level + 1)

        walk(top, 1)
        return out

    def op_mkdir(self, path):
        import os

        full = self.path(path)
        if os.path.isdir(full):
            return False
        os.makedirs(full)
        return True

    def op_remove(self, path):
        import os, shutil

        full = self.path(path)
        if full == self.root:
            raise _Outside("the workspace itself cannot be removed")
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)
        return None

    def op_move(self, src, dst):
        import os

        a, b = self.path(src), self.path(dst)
        os.makedirs(os.path.dirname(b), exist_ok=True)
        os.rename(a, b)
        return self._entry(b)

    def op_read(self, path, off, limit):
        import base64, os

        full = self.path(path)
        if os.path.isdir(full):
            raise IsADirectoryError(21, "is a directory", full)
        with open(full, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(off)
            data = f.read(limit)
        return {"data": base64.b64encode(data).decode("ascii"), "size": size}

    # contexts ---------------------------------------------------------

    def op_context(self):
        import types, uuid

        cid = str(uuid.uuid4())
        mod = types.ModuleType("__main__")
        mod.__dict__["__builtins__"] = __builtins__
        for k in ("llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched", "SHOW_VARS"):
            if k in self.ns:
                mod.__dict__[k] = self.ns[k]
        self.contexts[cid] = mod.__dict__
        return {"id": cid}

    def run_in(self, cid, code):
        """Run code as one cell of context cid; what the cell gives as its
        result (the repr of a final expression) comes back unchanged."""
        ns = self.contexts.get(cid)
        if ns is None:
            raise KeyError("no context %r in this sandbox: create one first" % cid)
        self.cells += 1
        name = "<context cell %d>" % self.cells
        if self.cell_run is None:
            exec(compile(code, name, "exec"), ns)
            return None
        import linecache

        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        text = self.cell_run(code, name, ns, 1 << 20)
        return None if text is None else _RlmRaw(text)


class _RlmRaw:
    """A value whose repr is text: a context cell's result, passed through
    the session cell that ran it unchanged."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


class _Outside(Exception):
    pass


class _NoProcess(Exception):
    pass
