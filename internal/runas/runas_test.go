package runas

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// needRoot skips a test that must change owners, unless CI asks for every
// run_as test (ORCH_REQUIRE_RUNAS=1): there, not being root fails.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("ORCH_REQUIRE_RUNAS") == "1" {
		t.Fatal("run_as tests need root and ORCH_REQUIRE_RUNAS=1 is set: run the tests as root")
	}
	t.Skip("changing owners needs root")
}

func owner(t *testing.T, path string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode()
}

func TestGiveTree(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	dir := filepath.Join(base, "wt")
	outside := filepath.Join(base, "secret")
	for _, f := range []string{outside, filepath.Join(dir, ".git"), filepath.Join(dir, "a.txt"), filepath.Join(dir, "sub", "b.txt"), filepath.Join(dir, "theirs")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(dir, "sub", "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(dir, "theirs"), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	u := &User{Name: "t", UID: 12345, GID: 12346, Home: "/"}
	if err := u.GiveTree(dir); err != nil {
		t.Fatal(err)
	}
	lead := uint32(os.Geteuid())
	if uid, gid, mode := owner(t, dir); uid != lead || gid != u.GID || mode.Perm() != 0o770 || mode&os.ModeSticky == 0 {
		t.Errorf("top: uid %d gid %d mode %v; want the lead's, group %d, 1770", uid, gid, mode, u.GID)
	}
	for _, p := range []string{"a.txt", "sub", "sub/b.txt", "link"} {
		if uid, gid, _ := owner(t, filepath.Join(dir, p)); uid != u.UID || gid != u.GID {
			t.Errorf("%s: %d:%d, want %d:%d", p, uid, gid, u.UID, u.GID)
		}
	}
	// The .git file, a file with a second hard link, the link's target and
	// what someone else owns are not handed over.
	for p, want := range map[string]uint32{filepath.Join(dir, ".git"): lead, filepath.Join(dir, "sub", "hard"): lead, outside: lead, filepath.Join(dir, "theirs"): 4242} {
		if uid, _, _ := owner(t, p); uid != want {
			t.Errorf("%s: owner %d, want %d", p, uid, want)
		}
	}
}

func TestGive(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "agent")
	if err := os.MkdirAll(filepath.Join(dir, "claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "claude", ".claude.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := &User{Name: "t", UID: 12345, GID: 12346, Home: "/"}
	if err := u.Give(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "claude"), filepath.Join(dir, "claude", ".claude.json")} {
		if uid, gid, _ := owner(t, p); uid != u.UID || gid != u.GID {
			t.Errorf("%s: %d:%d, want %d:%d", p, uid, gid, u.UID, u.GID)
		}
	}
	var nilUser *User
	if err := nilUser.Give("/nonexistent"); err != nil {
		t.Errorf("nil user: %v", err)
	}
}

func TestCommandAndEnv(t *testing.T) {
	u := &User{Name: "orch-w1", UID: 1001, GID: 1002, Home: "/home/orch-w1"}
	got := u.Command(`export PATH='/b':"$PATH"; exec claude --settings 'it'"'"'s'`)
	if !strings.HasPrefix(got, "exec setpriv --reuid=1001 --regid=1002 --init-groups -- sh -c '") {
		t.Errorf("Command = %s", got)
	}
	var nilUser *User
	if c := nilUser.Command("claude"); c != "claude" {
		t.Errorf("nil Command = %q", c)
	}
	env := map[string]string{"HOME": "/root"}
	u.Env(env, "/repo/.orch/worktrees/w1", "", "/repo")
	want := map[string]string{"HOME": "/home/orch-w1", "TMPDIR": "/tmp", "USER": "orch-w1", "LOGNAME": "orch-w1", "GIT_CONFIG_COUNT": "2",
		"GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "/repo/.orch/worktrees/w1", "GIT_CONFIG_KEY_1": "safe.directory", "GIT_CONFIG_VALUE_1": "/repo"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	out := u.Environ([]string{"HOME=/root", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.editor", "GIT_CONFIG_VALUE_0=vi", "PATH=/bin"}, "/wt")
	joined := "\n" + strings.Join(out, "\n") + "\n"
	for _, s := range []string{"\nHOME=/home/orch-w1\n", "\nPATH=/bin\n", "\nGIT_CONFIG_COUNT=1\n", "\nGIT_CONFIG_VALUE_0=/wt\n"} {
		if !strings.Contains(joined, s) {
			t.Errorf("Environ lacks %q: %q", s, out)
		}
	}
	for _, s := range []string{"HOME=/root", "core.editor", "=vi\n"} {
		if strings.Contains(joined, s) {
			t.Errorf("Environ kept %q: %q", s, out)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, name := range []string{"root", "Bad Name", "", "no-such-user-orch-test"} {
		if _, err := Lookup(name); !errors.Is(err, ErrUser) {
			t.Errorf("Lookup(%q) = %v, want ErrUser", name, err)
		}
	}
	if _, err := Lookup("no-such-user-orch-test"); err == nil || !strings.Contains(err.Error(), "useradd") {
		t.Errorf("unknown user: %v, want the useradd hint", err)
	}
	if me, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil && me.Uid != "0" {
		if _, err := Lookup(me.Username); !errors.Is(err, ErrUser) {
			t.Errorf("Lookup(the lead's own user %s) = %v, want ErrUser", me.Username, err)
		}
	}
	u, err := Lookup("nobody")
	if err != nil {
		t.Fatalf("Lookup(nobody): %v", err)
	}
	if u.UID == 0 || u.Home == "" {
		t.Errorf("nobody = %+v", u)
	}
}

func TestCheck(t *testing.T) {
	needRoot(t)
	u, err := Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	// base is root's and closed to nobody; the test's own folder above it
	// (0700) is opened, so base is the first one closed.
	base := t.TempDir()
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(base), 0o711); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(base, "open", "key")
	if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = u.Check("/usr/bin:/bin", Probe{What: "run", Path: "sh"}, Probe{What: "read", Path: secret})
	if !errors.Is(err, ErrCannot) || !strings.Contains(err.Error(), "cannot read "+secret) || !strings.Contains(err.Error(), "chmod o+x "+base) {
		t.Errorf("Check = %v; want it to name %s as closed", err, base)
	}
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := u.Check("/usr/bin:/bin", Probe{What: "run", Path: "sh"}, Probe{What: "read", Path: secret}); err != nil {
		t.Errorf("Check with the folder open: %v", err)
	}
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := u.Check("/usr/bin:/bin", Probe{What: "read", Path: secret}); !errors.Is(err, ErrCannot) {
		t.Errorf("Check of a 0600 file of root's = %v, want ErrCannot", err)
	}
	if err := u.Check("/usr/bin:/bin", Probe{What: "run", Path: "no-such-agent"}); !errors.Is(err, ErrCannot) || !strings.Contains(err.Error(), "cannot run no-such-agent") {
		t.Errorf("Check of a missing program = %v", err)
	}
}
