package osenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/env"
)

// lockHelperDir, set in the environment, makes TestLockHelperProcess a
// helper: it locks .lock in that directory, says so, and waits to be killed.
const lockHelperDir = "OSENV_LOCK_HELPER_DIR"

func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv(lockHelperDir)
	if dir == "" {
		t.Skip("helper process of TestLockHeldByAnotherProcess")
	}
	n := newTestNodeIn(t, NewLoop(), dir)
	if _, err := n.fs.Lock(".lock"); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin) // until the parent kills us
	os.Exit(0)
}

// lockOn calls Lock on a node's loop.
func lockOn(t *testing.T, n *Node, name string) (io.Closer, error) {
	t.Helper()
	var l io.Closer
	var err error
	if !runOn(n.loop, func() { l, err = n.fs.Lock(name) }) {
		t.Fatal("the loop did not run Lock")
	}
	return l, err
}

// TestLockHeldByAnotherProcess: a Lock held by another process is refused
// with its pid; once that process is killed (kill -9: no Close), the lock
// is free.
func TestLockHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	helper.Env = append(os.Environ(), lockHelperDir+"="+dir)
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}

	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	n := newTestNodeIn(t, loop, dir)
	defer n.Close()
	_, err = lockOn(t, n, ".lock")
	var locked *env.LockedError
	if !errors.As(err, &locked) || !errors.Is(err, env.ErrLocked) {
		t.Fatalf("Lock held by the helper: err = %v (%T), want an *env.LockedError", err, err)
	}
	wantPid := fmt.Sprintf("pid %d", helper.Process.Pid)
	if locked.Holder != wantPid && !strings.HasPrefix(locked.Holder, wantPid+" on host ") {
		t.Fatalf("holder %q, want the helper's %q", locked.Holder, wantPid)
	}
	if !strings.Contains(err.Error(), wantPid) {
		t.Fatalf("the error %q does not name the holder", err)
	}

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	l, err := lockOn(t, n, ".lock")
	if err != nil {
		t.Fatalf("Lock after the holder was killed: %v", err)
	}
	holder, err := os.ReadFile(filepath.Join(dir, ".lock"))
	if err != nil || string(holder) != fmt.Sprintf("pid %d", os.Getpid())+hostSuffix()+"\n" {
		t.Fatalf("lock file holds %q, %v; want this process's line", holder, err)
	}
	if !runOn(loop, func() { err = l.Close() }) || err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func hostSuffix() string {
	if host, err := os.Hostname(); err == nil && host != "" {
		return " on host " + host
	}
	return ""
}

// TestLockTwoNodesOfOneProcess: flock locks belong to an open file, so two
// nodes of one process over one directory exclude each other; the refusal
// says the holder is this very process; Node.Close releases the lock.
func TestLockTwoNodesOfOneProcess(t *testing.T) {
	dir := t.TempDir()
	loop := NewLoop()
	go loop.Run()
	defer loop.Stop()
	first := newTestNodeIn(t, loop, dir)
	second := newTestNodeIn(t, loop, dir)
	defer second.Close()
	if _, err := lockOn(t, first, ".lock"); err != nil {
		t.Fatal(err)
	}
	_, err := lockOn(t, second, ".lock")
	var locked *env.LockedError
	if !errors.As(err, &locked) || !strings.HasSuffix(locked.Holder, " (this process)") {
		t.Fatalf("second node's Lock: err = %v, want one naming this process", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := lockOn(t, second, ".lock")
	if err != nil {
		t.Fatalf("Lock after the holder's node closed: %v", err)
	}
	if !runOn(loop, func() { err = l.Close() }) || err != nil {
		t.Fatalf("Close: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".lock")); err != nil || len(b) != 0 {
		t.Fatalf("a released lock file holds %q, %v; want it empty", b, err)
	}
}
