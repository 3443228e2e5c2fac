package lead

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDynamicallyLinked(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module tiny\n"), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nimport \"net\"\n\nvar _ = net.Dial\n\nfunc main() {}\n"), 0o644)
	static := filepath.Join(dir, "static")
	build := exec.Command("go", "build", "-o", static, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if dyn, err := DynamicallyLinked(static); err != nil || dyn {
		t.Errorf("CGO_ENABLED=0 build: dynamic=%v err=%v, want static", dyn, err)
	}
	if c := notifyLinkCheck(static); !c.OK || c.Fix != "" {
		t.Errorf("check of a static build = %+v, want ok without a fix", c)
	}

	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	if sh, err = filepath.EvalSymlinks(sh); err != nil {
		t.Fatal(err)
	}
	if dyn, err := DynamicallyLinked(sh); err != nil || !dyn {
		t.Errorf("%s: dynamic=%v err=%v, want dynamic", sh, dyn, err)
	}
	if c := notifyLinkCheck(sh); c.OK || !c.Optional || !strings.Contains(c.Fix, "CGO_ENABLED=0") {
		t.Errorf("check of a dynamic executable = %+v, want an optional warning naming CGO_ENABLED=0", c)
	}

	text := filepath.Join(dir, "script")
	os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o755)
	if _, err := DynamicallyLinked(text); err == nil {
		t.Error("a shell script: no error, want one saying it is not an ELF executable")
	}
	if c := notifyLinkCheck(text); c.OK || !c.Optional || !strings.Contains(c.Info, "not an ELF") {
		t.Errorf("check of a script = %+v, want an optional warning saying it is not ELF", c)
	}
}
