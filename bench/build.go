package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// binary is one built executable.
type binary struct {
	Label string
	Build string // the command that built it, as a reader would type it
	Path  string
	Size  int64
	Link  string // "static" or "dynamic (ld.so)"
}

// binaries are the executables the bench builds. full is the one it times:
// orch-notify exactly as the README builds it (CGO_ENABLED=0). stripped is
// the same, stripped, for the size target. cgo is the README's command with
// cgo on, Go's default wherever a C compiler is installed, timed beside it to
// show the dynamic loader's share; it is missing (Path "") where cgo cannot
// build or does not link dynamically, and when no start-up case needs it.
type binaries struct {
	full, stripped, cgo, empty binary
}

func (b binaries) list() []binary {
	var l []binary
	for _, bin := range []binary{b.full, b.stripped, b.cgo, b.empty} {
		if bin.Path != "" {
			l = append(l, bin)
		}
	}
	return l
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// moduleRoot is the directory of the orch module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run it from inside the orch module (go run ./bench)")
	}
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	if !bytes.Contains(data, []byte("module github.com/orch-dev/orch\n")) {
		return "", fmt.Errorf("%s is not the orch module", gomod)
	}
	return filepath.Dir(gomod), nil
}

const stripFlags = "-ldflags=-s -w"

func buildAll(ctx context.Context, root, dir string, withCgo bool) (binaries, error) {
	var b binaries
	var err error
	build := func(label, shown, out, pkg, workDir string, env []string, args ...string) binary {
		if err != nil {
			return binary{}
		}
		path := filepath.Join(dir, out)
		cmd := exec.CommandContext(ctx, "go", append(append([]string{"build", "-o", path}, args...), pkg)...)
		cmd.Dir = workDir
		cmd.Env = append(os.Environ(), env...)
		if msg, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("%s: %v\n%s", shown, e, msg)
			return binary{}
		}
		bin := binary{Label: label, Build: shown, Path: path}
		fi, e := os.Stat(path)
		if e != nil {
			err = e
			return binary{}
		}
		bin.Size = fi.Size()
		bin.Link = linkage(path)
		return bin
	}
	static := []string{"CGO_ENABLED=0"}
	b.full = build("orch-notify (the README's build)", "CGO_ENABLED=0 go build ./cmd/orch-notify",
		"orch-notify", "./cmd/orch-notify", root, static)
	b.stripped = build("orch-notify, stripped", "CGO_ENABLED=0 go build -ldflags='-s -w' -trimpath ./cmd/orch-notify",
		"orch-notify-stripped", "./cmd/orch-notify", root, static, stripFlags, "-trimpath")
	if err != nil {
		return b, err
	}
	if withCgo {
		b.cgo = build("orch-notify, cgo on", "CGO_ENABLED=1 go build ./cmd/orch-notify",
			"orch-notify-cgo", "./cmd/orch-notify", root, []string{"CGO_ENABLED=1"})
		switch {
		case err != nil:
			logf("no cgo build (%v): the cgo rows are left out", err)
			b.cgo, err = binary{}, nil
		case !strings.HasPrefix(b.cgo.Link, "dynamic"):
			logf("the cgo build links statically here (GOFLAGS tags?): the cgo rows are left out")
			b.cgo = binary{}
		}
	}
	emptyDir := filepath.Join(dir, "empty-src")
	if err := os.MkdirAll(emptyDir, 0o755); err != nil {
		return b, err
	}
	if err := os.WriteFile(filepath.Join(emptyDir, "go.mod"), []byte("module empty\n"), 0o644); err != nil {
		return b, err
	}
	if err := os.WriteFile(filepath.Join(emptyDir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		return b, err
	}
	b.empty = build("empty Go binary, stripped", "go build -ldflags='-s -w' -trimpath (package main; func main(){})",
		"empty", ".", emptyDir, nil, stripFlags, "-trimpath")
	return b, err
}

// linkage says whether the executable needs the dynamic loader.
func linkage(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "dynamic (ld.so)"
		}
	}
	return "static"
}

// codeSize is the machine code (text symbols) attributed to one module or package.
type codeSize struct {
	Name  string
	Bytes int64
}

type codeReport struct {
	Text     int64 // all text symbols
	Modules  []codeSize
	Packages []codeSize // the largest packages
}

// codeByModule attributes the text symbols of the unstripped binary to the
// packages it links (the longest import path that prefixes the symbol) and
// sums them per module ("std" for the standard library).
func codeByModule(ctx context.Context, root, bin string) (codeReport, error) {
	var r codeReport
	list := exec.CommandContext(ctx, "go", "list", "-deps", "-f", "{{.ImportPath}} {{if .Module}}{{.Module.Path}}{{else}}std{{end}}", "./cmd/orch-notify")
	list.Dir = root
	list.Env = append(os.Environ(), "CGO_ENABLED=0") // as bin was built
	out, err := list.Output()
	if err != nil {
		return r, fmt.Errorf("go list: %w", err)
	}
	moduleOf := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if pkg, mod, ok := strings.Cut(line, " "); ok {
			moduleOf[pkg] = mod
		}
	}
	moduleOf["main"] = moduleOf["github.com/orch-dev/orch/cmd/orch-notify"] // package main's symbols are main.*
	nm := exec.CommandContext(ctx, "go", "tool", "nm", "-size", bin)
	nm.Dir = root
	out, err = nm.Output()
	if err != nil {
		return r, fmt.Errorf("go tool nm: %w", err)
	}
	byMod, byPkg := map[string]int64{}, map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (f[2] != "T" && f[2] != "t") {
			continue
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		r.Text += size
		pkg := symbolPackage(strings.Join(f[3:], " "), moduleOf)
		mod := moduleOf[pkg]
		if pkg == "" {
			pkg, mod = noPackage, noPackage
		}
		byPkg[pkg] += size
		byMod[mod] += size
	}
	r.Modules = sorted(byMod)
	r.Packages = sorted(byPkg)
	if len(r.Packages) > 10 {
		r.Packages = r.Packages[:10]
	}
	return r, nil
}

// noPackage holds the text symbols no Go package claims: runtime assembly
// helpers, cgo glue.
const noPackage = "(no package: assembly, cgo)"

func symbolPackage(sym string, known map[string]string) string {
	if u, err := url.PathUnescape(sym); err == nil {
		sym = u // "nats%2ego" is nats.go
	}
	for _, p := range []string{"type:.eq.", "type:.hash.", "go:itab.", "*"} {
		sym = strings.TrimPrefix(sym, p)
	}
	if strings.HasPrefix(sym, "[") { // type:.eq.[8]pkg.T
		if i := strings.IndexByte(sym, ']'); i > 0 {
			sym = strings.TrimPrefix(sym[i+1:], "*")
		}
	}
	best := ""
	for i := 0; i < len(sym); i++ {
		if sym[i] != '.' {
			continue
		}
		if _, ok := known[sym[:i]]; ok && i > len(best) {
			best = sym[:i]
		}
	}
	return best
}

func sorted(m map[string]int64) []codeSize {
	s := make([]codeSize, 0, len(m))
	for k, v := range m {
		s = append(s, codeSize{k, v})
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].Bytes != s[j].Bytes {
			return s[i].Bytes > s[j].Bytes
		}
		return s[i].Name < s[j].Name
	})
	return s
}
