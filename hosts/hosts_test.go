package hosts

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAddListRemove(t *testing.T) {
	dir := t.TempDir()
	h1, tok, err := Add(dir, "build-1", 2, []string{"w1", "w3"}, "orch")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h1.Workers, []string{"w2", "w4"}) {
		t.Errorf("workers %v, want w2 w4 (w1 and w3 are the lead's)", h1.Workers)
	}
	got, err := ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != "build-1" || !slices.Equal(got.Workers, h1.Workers) || got.Prefix != "orch" {
		t.Errorf("token %+v", got)
	}
	if strings.Contains(mustRead(t, filepath.Join(dir, Dir, "build-1.json")), got.Seed) {
		t.Error("the entry holds the host's seed")
	}
	if fi, _ := os.Stat(filepath.Join(dir, Dir, "build-1.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("entry mode %v", fi.Mode().Perm())
	}
	h2, _, err := Add(dir, "gpu", 1, []string{"w1", "w3"}, "orch")
	if err != nil || !slices.Equal(h2.Workers, []string{"w5"}) {
		t.Fatalf("second host: %v %v", h2.Workers, err)
	}
	if _, _, err := Add(dir, "gpu", 1, nil, "orch"); !errors.Is(err, ErrExists) {
		t.Errorf("adding gpu again: %v", err)
	}
	all, err := List(dir)
	if err != nil || len(all) != 2 || all[0].Name != "build-1" {
		t.Fatalf("list %v %v", all, err)
	}
	if Owner(all, "w5") != "gpu" || Owner(all, "w1") != "" {
		t.Error("owner")
	}
	if _, err := Remove(dir, "gpu"); err != nil {
		t.Fatal(err)
	}
	if _, err := Remove(dir, "gpu"); !errors.Is(err, ErrUnknown) {
		t.Errorf("removing twice: %v", err)
	}
	if all, _ := List(dir); len(all) != 1 {
		t.Errorf("after remove: %v", all)
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", "Build", "a.b", "a b", "lead", "x-", "-x", "a>", strings.Repeat("a", 32)} {
		if _, _, err := Add(dir, name, 1, nil, "orch"); !errors.Is(err, ErrName) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if _, _, err := Add(dir, "ok", 0, nil, "orch"); !errors.Is(err, ErrWorker) {
		t.Errorf("0 workers: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, Dir)); len(entries) != 0 {
		t.Errorf("a refusal wrote %v", entries)
	}
	_, tok, err := Add(dir, "ok", 1, nil, "orch")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "x" + tok, tok[:len(tok)-5], strings.Replace(tok, "orchhost1.", "orchhost1.e30", 1)} {
		if _, err := ParseToken(bad); !errors.Is(err, ErrToken) {
			t.Errorf("token %.20q: %v", bad, err)
		}
	}
	// An entry changed by hand is an error naming the file, not skipped.
	os.WriteFile(filepath.Join(dir, Dir, "ok.json"), []byte(`{"name":"other"}`), 0o600)
	if _, err := List(dir); err == nil || !strings.Contains(err.Error(), "ok.json") {
		t.Errorf("list with a changed entry: %v", err)
	}
}

func mustRead(t *testing.T, p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
