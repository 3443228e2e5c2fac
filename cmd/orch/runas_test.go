package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// requireRunAs is true in CI: the run_as scripts need root (to make Unix
// users and start processes as them), and there not being root fails
// them instead of skipping.
func requireRunAs() bool { return os.Getenv("ORCH_REQUIRE_RUNAS") == "1" }

// unixuser VAR...: make a Unix user of its own for each VAR (a random
// name, set in $VAR), with a home folder in $WORK; they are deleted, and
// every process they still run killed, when the script ends. Needs root
// (the runas condition).
func cmdUnixUser(ts *testscript.TestScript, neg bool, args []string) {
	if os.Geteuid() != 0 {
		ts.Fatalf("making Unix users needs root: guard the script with [!runas] skip")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		ts.Fatalf("useradd is not installed (apt-get install -y passwd)")
	}
	for _, v := range args {
		var b [4]byte
		rand.Read(b[:])
		name := "orcht-" + hex.EncodeToString(b[:])
		home := filepath.Join(ts.Getenv("WORK"), "home-"+strings.ToLower(v))
		out, err := exec.Command("useradd", "--no-create-home", "--home-dir", home, "--shell", "/bin/sh", "--user-group", name).CombinedOutput()
		if err != nil {
			ts.Fatalf("useradd %s: %v: %s", name, err, out)
		}
		ts.Defer(func() {
			exec.Command("pkill", "-KILL", "-u", name).Run()
			exec.Command("userdel", name).Run()
		})
		if err := os.MkdirAll(home, 0o700); err != nil {
			ts.Fatalf("%v", err)
		}
		if out, err := exec.Command("chown", name+":"+name, home).CombinedOutput(); err != nil {
			ts.Fatalf("chown %s: %v: %s", home, err, out)
		}
		ts.Setenv(v, name)
	}
}

// condRunAs is the runas condition: this process can make users and run
// processes as them (it is root). Not being root where it is required is
// an error, never a skip.
func condRunAs() (bool, error) {
	if os.Geteuid() == 0 {
		return true, nil
	}
	if requireRunAs() {
		return false, errors.New("the run_as scripts need root, and ORCH_REQUIRE_RUNAS=1: run the tests as root")
	}
	return false, nil
}

// opendirs PATH...: let other users search each PATH and every folder
// above it that is the test's own (below the temporary folder), and the
// folder holding the orch the script runs: a worker of its own user must
// reach its worktree and run orch-notify.
func cmdOpenDirs(ts *testscript.TestScript, neg bool, args []string) {
	orch, err := exec.LookPath("orch")
	if p := ts.Getenv("PATH"); p != "" {
		for _, d := range filepath.SplitList(p) {
			if _, err2 := os.Stat(filepath.Join(d, "orch")); err2 == nil {
				orch, err = filepath.Join(d, "orch"), nil
				break
			}
		}
	}
	if err != nil {
		ts.Fatalf("orch not found on the script's PATH")
	}
	dirs := []string{filepath.Dir(orch)}
	if real, err := filepath.EvalSymlinks(orch); err == nil {
		dirs = append(dirs, filepath.Dir(real)) // the test binary it links to
	}
	tmp := filepath.Clean(os.TempDir())
	for _, p := range append(dirs, args...) {
		for d := filepath.Clean(ts.MkAbs(p)); strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil {
				ts.Fatalf("%v", err)
			}
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				ts.Fatalf("%v", err)
			}
		}
	}
	if err := os.Chmod(orch, 0o755); err != nil {
		ts.Fatalf("%v", err)
	}
}
