package pyodide

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rlmkit/rlm/core/ending"
)

// sqlite3 is built in (build.sh compiles SQLite's amalgamation for WASI).
// Its VFS takes no locks, so a run stopped mid-transaction, here by its fuel
// limit with uncommitted pages already written to the database file, leaves
// nothing that blocks the next run: that one rolls the hot journal back and
// sees exactly what was committed. With SQLite's WASI default VFS
// (unix-dotfile) the stopped run would leave app.db.lock behind and every
// later open would fail with "database is locked".
func TestSqliteStoppedTransactionRecovers(t *testing.T) {
	ws := t.TempDir()
	write := `import sqlite3
db = sqlite3.connect("app.db", isolation_level=None)
db.execute("pragma cache_size=2")  # spill uncommitted pages into app.db
db.execute("create table t (k integer primary key, v blob)")
db.execute("insert into t (v) values (zeroblob(100))")
db.execute("begin")
for i in range(200):
    db.execute("insert into t (v) values (randomblob(2000))")
print("in transaction", flush=True)
while True:
    pass
`
	// The work before the loop costs about 4 M units: ample headroom.
	res := run(t, RunSpec{Code: write, Workspace: ws, Fuel: 50_000_000})
	wantStopped(t, res, ending.Fuel, "OutOfFuel")
	if string(res.Stdout) != "in transaction\n" {
		dump(t, res)
		t.Fatal("the run did not reach the open transaction")
	}
	if _, err := os.Stat(filepath.Join(ws, "app.db-journal")); err != nil {
		t.Fatalf("no hot journal left by the stopped run, so nothing is tested: %v", err)
	}

	read := `import os, sqlite3
db = sqlite3.connect("app.db")
print(db.execute("select count(*) from t").fetchone()[0], db.execute("pragma integrity_check").fetchone()[0])
db.execute("insert into t (v) values (x'00')")
db.commit()
db.close()
print(sorted(os.listdir(".")))
`
	res = run(t, RunSpec{Code: read, Workspace: ws})
	if want := "1 ok\n['app.db']\n"; !res.Success || string(res.Stdout) != want {
		dump(t, res)
		t.Fatalf("after the stopped run: stdout = %q, want %q", res.Stdout, want)
	}
}

// The module reports the SQLite it was built from: one with WASI support
// (3.41 or later), single-threaded as WASI is.
func TestSqliteVersion(t *testing.T) {
	res := run(t, RunSpec{Code: "import sqlite3; print(sqlite3.sqlite_version_info >= (3, 41), sqlite3.threadsafety)"})
	if !res.Success || string(res.Stdout) != "True 0\n" {
		dump(t, res)
		t.Fatalf("sqlite3 version >= 3.41, threadsafety = %q, want \"True 0\"", res.Stdout)
	}
}
