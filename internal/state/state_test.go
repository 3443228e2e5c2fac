package state

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/orchdir"
)

func TestSnapshotRestoresTheStateAsItWas(t *testing.T) {
	st := New()
	st.Plans["a"] = &Run{Name: "a", State: PlanQueued}
	st.Handled["e1"] = &Handled{Kind: "dispatch", Plan: "a", Time: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	want, _ := json.Marshal(st)

	before := st.Snapshot()
	st.Plans["a"].State = PlanRunning // an effect half-way
	st.Plans["b"] = &Run{Name: "b"}
	delete(st.Handled, "e1")

	got := before.Restore(st)
	if got == st {
		t.Fatal("restore returned the changed state itself")
	}
	if data, _ := json.Marshal(got); string(data) != string(want) {
		t.Errorf("restored %s\nwant     %s", data, want)
	}

	// A snapshot that could not be taken gives back the current state, as
	// the copy it stands for would have been that state.
	failed := Snapshot{err: errors.New("no")}
	if got := failed.Restore(st); got != st {
		t.Error("a failed snapshot restored something else than the current state")
	}
}

func TestSaveIsReadBackAsSaved(t *testing.T) {
	dir := t.TempDir()
	st := New()
	st.Plans["a"] = &Run{Name: "a", State: PlanDone, Status: "tests pass"}
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, orchdir.State))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode %v, want 0600", orchdir.State, fi.Mode().Perm())
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Errorf("read back %+v, want %+v", back, st)
	}
}
