package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// envWriter makes the test binary a writer process of
// TestTwoProcessesOneLog: the log's path, and its name and record count.
const envWriter = "TOOLGATE_AUDIT_TEST_WRITER"

// TestAuditWriterProcess is the body of a writer process: it opens the log
// as a gateway does, waits for its go (a line on stdin), writes its
// records from 8 goroutines and closes the log. Run bare it does nothing.
func TestAuditWriterProcess(t *testing.T) {
	spec := os.Getenv(envWriter)
	if spec == "" {
		return
	}
	f := strings.Split(spec, "|") // path|name|records|maxFileBytes
	n, _ := strconv.Atoi(f[2])
	size, _ := strconv.ParseInt(f[3], 10, 64)
	l := Open(f[0], &Options{Config: f[1], MaxFileBytes: size, MaxFiles: 1000, Queue: n})
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := g; i < n; i += 8 {
				l.Write(Record{Action: "execute_tool", Tool: "memory__read_graph", Decision: Allowed, Outcome: OK, ResultBytes: i, Reason: strings.Repeat("x", 100+i%300)})
			}
		}()
	}
	for range 8 {
		<-done
	}
	l.Close()
	if st := l.Stats(); st.Dropped != 0 || st.Written != uint64(n) {
		t.Fatalf("stats %+v, want %d written", st, n)
	}
}

// Gateways of two configs append to one audit log from two processes, and
// rotate it by size as they go: every record of each is in the files
// kept, once, each line a whole record.
func TestTwoProcessesOneLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	const n = 3000
	var stdins []io.WriteCloser
	var cmds []*exec.Cmd
	for _, name := range []string{"/etc/a.json", "/etc/b.json"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAuditWriterProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envWriter+"="+path+"|"+name+"|"+strconv.Itoa(n)+"|"+strconv.Itoa(32<<10))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdins, cmds = append(stdins, in), append(cmds, cmd)
	}
	for _, in := range stdins {
		fmt.Fprintln(in, "go")
		in.Close()
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer process: %v", err)
		}
	}
	files, _ := filepath.Glob(path + "*")
	seen := map[string]int{}
	lines := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			if line == "" {
				continue
			}
			lines++
			var r Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s line %d is not a whole record: %v\n%.160s", filepath.Base(file), i+1, err, line)
			}
			seen[fmt.Sprintf("%s#%d", r.Config, r.ResultBytes)]++
		}
	}
	if lines != 2*n || len(seen) != 2*n {
		t.Errorf("%d lines, %d distinct records in %d files; want %d each", lines, len(seen), len(files), 2*n)
	}
}
