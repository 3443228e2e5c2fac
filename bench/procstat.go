package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// procSample is what /proc says about one process at one moment.
type procSample struct {
	At       time.Time
	CPUTicks int64         // utime+stime of the whole process (/proc/<pid>/stat), clock ticks, dead threads included
	RunNs    time.Duration // on-CPU time summed over live threads (/proc/<pid>/task/*/schedstat), ns resolution
	Switches int64         // voluntary+nonvoluntary context switches summed over live threads
	Threads  int
	RSS, HWM int64 // VmRSS, VmHWM in bytes
}

// clockTick is USER_HZ: 100 on every Linux this runs on (sysconf is not
// reachable without cgo).
const clockTick = 100

func sampleProc(pid int) (procSample, error) {
	s := procSample{At: time.Now()}
	dir := fmt.Sprintf("/proc/%d", pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return s, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return s, fmt.Errorf("%s/stat: too few fields", dir)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s.CPUTicks = ut + st
	tasks, err := filepath.Glob(dir + "/task/*")
	if err != nil {
		return s, err
	}
	for _, t := range tasks {
		s.Threads++
		if data, err := os.ReadFile(t + "/schedstat"); err == nil {
			if f := strings.Fields(string(data)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				s.RunNs += time.Duration(ns)
			}
		}
		st, err := statusFields(t + "/status")
		if err != nil {
			continue // the thread exited between the listing and the read
		}
		s.Switches += st["voluntary_ctxt_switches"] + st["nonvoluntary_ctxt_switches"]
	}
	st2, err := statusFields(dir + "/status")
	if err != nil {
		return s, err
	}
	s.RSS, s.HWM = st2["VmRSS"]*1024, st2["VmHWM"]*1024
	return s, nil
}

// statusFields reads the numeric fields of a /proc status file (kB values
// as numbers of kB).
func statusFields(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		if f := strings.Fields(v); len(f) > 0 {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				m[k] = n
			}
		}
	}
	return m, nil
}

// idleCost is the difference between two samples, per second.
type idleCost struct {
	Window        time.Duration
	CPUTicks      int64   // utime+stime over the window, ticks
	CPUmsPerSec   float64 // from the ticks (10 ms resolution)
	RunMsPerSec   float64 // from schedstat (ns resolution, live threads)
	SwitchesPerS  float64
	Threads       int
	RSSEnd, HWMEn int64
}

func costBetween(a, b procSample) idleCost {
	w := b.At.Sub(a.At)
	sec := w.Seconds()
	return idleCost{
		Window:       w,
		CPUTicks:     b.CPUTicks - a.CPUTicks,
		CPUmsPerSec:  float64(b.CPUTicks-a.CPUTicks) * 1000 / clockTick / sec,
		RunMsPerSec:  float64(b.RunNs-a.RunNs) / 1e6 / sec,
		SwitchesPerS: float64(b.Switches-a.Switches) / sec,
		Threads:      b.Threads,
		RSSEnd:       b.RSS,
		HWMEn:        b.HWM,
	}
}

// dist is the distribution of a set of durations.
type dist struct {
	N                       int
	Min, Med, P95, P99, Max time.Duration
}

func distOf(d []time.Duration) dist {
	if len(d) == 0 {
		return dist{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return dist{N: len(s), Min: s[0], Max: s[len(s)-1], Med: percentile(s, 500), P95: percentile(s, 950), P99: percentile(s, 990)}
}
