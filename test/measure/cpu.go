package measure

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// procStat reads a process's CPU time (user and system; /proc counts
// clock ticks, 100 a second on Linux) and its parent from
// /proc/<pid>/stat.
func procStat(pid int) (cpu time.Duration, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name may hold spaces; the fields after it do not.
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, ppid, nil
}

// ChildCPU is the CPU time this process's children named (by their
// command) have used so far: kube-apiserver and etcd, which envtest starts.
func ChildCPU(names ...string) time.Duration {
	entries, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if !slices.Contains(names, strings.TrimSpace(string(comm))) {
			continue
		}
		if cpu, ppid, err := procStat(pid); err == nil && ppid == os.Getpid() {
			total += cpu
		}
	}
	return total
}
