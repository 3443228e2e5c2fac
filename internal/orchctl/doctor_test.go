package orchctl

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
)

// elfWith writes a minimal 64-bit ELF executable whose program headers
// have the given types, as the linker writes them (PT_INTERP names ld.so).
func elfWith(t *testing.T, path string, progs ...elf.ProgType) {
	t.Helper()
	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs)), Shentsize: 64,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.Write(&b, binary.LittleEndian, h)
	for _, typ := range progs {
		binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(typ), Flags: uint32(elf.PF_R)})
	}
	if err := os.WriteFile(path, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestDynamicallyLinked(t *testing.T) {
	dir := t.TempDir()
	dyn, static := filepath.Join(dir, "dyn"), filepath.Join(dir, "static")
	elfWith(t, dyn, elf.PT_PHDR, elf.PT_INTERP, elf.PT_LOAD)
	elfWith(t, static, elf.PT_LOAD, elf.PT_NOTE)
	if d, err := DynamicallyLinked(dyn); err != nil || !d {
		t.Errorf("with PT_INTERP: dynamic=%v err=%v, want dynamic", d, err)
	}
	if c := notifyLinkCheck(dyn); c.OK || !c.Optional || !strings.Contains(c.Fix, "CGO_ENABLED=0 go build -o "+dir+"/ ./cmd/orch-notify") {
		t.Errorf("check of a dynamic executable = %+v, want an optional warning with a rebuild into %s", c, dir)
	}
	if d, err := DynamicallyLinked(static); err != nil || d {
		t.Errorf("without PT_INTERP: dynamic=%v err=%v, want static", d, err)
	}

	// And a real build, as the README makes it.
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"go.mod":  "module tiny\n",
		"main.go": "package main\n\nimport \"net\"\n\nvar _ = net.Dial\n\nfunc main() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	built := filepath.Join(dir, "built")
	build := exec.Command("go", "build", "-o", built, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if c := notifyLinkCheck(built); !c.OK || c.Fix != "" || c.Info != "static" {
		t.Errorf("check of a CGO_ENABLED=0 build = %+v, want ok, static, no fix", c)
	}

	for name, data := range map[string]string{"script": "#!/bin/sh\necho hi\n", "short": "\x7fE", "empty": ""} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := DynamicallyLinked(p); err == nil || !strings.Contains(err.Error(), p+" is not an ELF executable") {
			t.Errorf("%s: err=%v, want one saying it is not an ELF executable", name, err)
		}
		if c := notifyLinkCheck(p); c.OK || !c.Optional || c.Fix != "" {
			t.Errorf("check of %s = %+v, want an optional warning without a fix", name, c)
		}
	}
	if _, err := DynamicallyLinked(filepath.Join(dir, "missing")); err == nil || strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("missing file: err=%v, want the open error itself", err)
	}
}

// tmux and git are asked for their versions through the runner: a missing
// program says how to install it, a tmux older than 3.0 how to upgrade.
func TestToolChecks(t *testing.T) {
	missing := &runner.Error{ExitCode: -1, Err: exec.ErrNotFound}
	for name, tt := range map[string]struct {
		out   string
		err   error
		check func(context.Context, runner.Runner) Check
		tool  string
		args  []string
		want  Check
	}{
		"tmux 3":       {"tmux 3.3a\n", nil, tmuxCheck, "tmux", []string{"-V"}, Check{Name: "tmux", OK: true, Info: "tmux 3.3a"}},
		"tmux 2":       {"tmux 2.9\n", nil, tmuxCheck, "tmux", []string{"-V"}, Check{Name: "tmux", Info: "tmux 2.9", Fix: "upgrade tmux to 3.0 or later (pane options and hooks are needed)"}},
		"tmux missing": {"", missing, tmuxCheck, "tmux", []string{"-V"}, Check{Name: "tmux", Fix: "install tmux 3.0 or later (Debian/Ubuntu: sudo apt-get install -y tmux; macOS: brew install tmux)"}},
		"git":          {"git version 2.39.5\n", nil, gitCheck, "git", []string{"--version"}, Check{Name: "git", OK: true, Info: "git version 2.39.5"}},
		"git missing":  {"", missing, gitCheck, "git", []string{"--version"}, Check{Name: "git", Fix: "install git (Debian/Ubuntu: sudo apt-get install -y git)"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := fake.New(t).Expect(tt.tool, tt.args, tt.out, tt.err)
			if got := tt.check(context.Background(), f); got != tt.want {
				t.Errorf("%+v; want %+v", got, tt.want)
			}
		})
	}
}
