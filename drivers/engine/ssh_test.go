package engine

import (
	"slices"
	"strings"
	"testing"
)

// TestSSHArgs: the ssh client runs `docker system dial-stdio` on the
// host, with the user and port of the address, never prompting.
func TestSSHArgs(t *testing.T) {
	for host, want := range map[string]string{
		"ssh://deploy@build-1.example": "-o ConnectTimeout=30 -o BatchMode=yes -l deploy -- build-1.example docker system dial-stdio",
		"ssh://deploy@10.0.0.5:2222":   "-o ConnectTimeout=30 -o BatchMode=yes -l deploy -p 2222 -- 10.0.0.5 docker system dial-stdio",
		"ssh://build-1.example":        "-o ConnectTimeout=30 -o BatchMode=yes -- build-1.example docker system dial-stdio",
		"ssh://root@[fd00::5]:22":      "-o ConnectTimeout=30 -o BatchMode=yes -l root -p 22 -- fd00::5 docker system dial-stdio",
	} {
		ep, err := ForHost("r", host)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if got := strings.Join(sshArgs(ep), " "); got != want {
			t.Errorf("%s:\n got %s\nwant %s", host, got, want)
		}
	}
}

// TestSSHError: what ssh wrote when it ended says what failed.
func TestSSHError(t *testing.T) {
	tests := []struct {
		code    int
		stderr  string
		failure Failure
		words   []string
	}{
		{255, "Warning: Permanently added '[127.0.0.1]:2222' (ED25519) to the list of known hosts.\r\nroot@127.0.0.1: Permission denied (publickey).\r\n", Authentication, []string{"ssh authentication to u@h:22 failed (root@127.0.0.1: Permission denied (publickey).)", "ssh-agent"}},
		{255, "Host key verification failed.\n", Authentication, []string{"ssh does not know the host key of u@h:22", "connect once with ssh"}},
		{255, "@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n", Authentication, []string{"host key"}},
		{255, "ssh: connect to host h port 22: Connection refused\n", Refused, []string{"the connection to u@h:22 was refused: no ssh server listens there"}},
		{255, "ssh: Could not resolve hostname h: Name or service not known\n", Unreachable, []string{"ssh cannot resolve the host of u@h:22 (ssh: Could not resolve hostname h"}},
		{255, "ssh: connect to host h port 22: Connection timed out\n", Unreachable, []string{"ssh to u@h:22 failed: ssh: connect to host h port 22: Connection timed out"}},
		{127, "bash: line 1: docker: command not found\n", Unreachable, []string{"there is no docker command on u@h:22", "Docker 18.09 or later"}},
		{1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n", Unreachable, []string{"`docker system dial-stdio` on u@h:22 ended with code 1: Cannot connect to the Docker daemon"}},
		{255, "", Unreachable, []string{"ssh to u@h:22 failed: it said nothing"}},
	}
	for _, tt := range tests {
		err := sshError("u@h:22", tt.code, tt.stderr)
		if FailureOf(err) != tt.failure {
			t.Errorf("%d %q: failure %q, want %q (%v)", tt.code, tt.stderr, FailureOf(err), tt.failure, err)
		}
		for _, w := range tt.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d %q: %q lacks %q", tt.code, tt.stderr, err, w)
			}
		}
		// The docker client replaces an error saying "connection
		// refused" with one that says nothing of the cause.
		if strings.Contains(err.Error(), "connection refused") {
			t.Errorf("%q says connection refused", err)
		}
	}
}

// TestLastLines keeps what ssh said last, on one line.
func TestLastLines(t *testing.T) {
	if got := lastLines("a\n\n b \nc\nd\n", 3); got != "b; c; d" {
		t.Errorf("lastLines = %q", got)
	}
	if got := lastLines(strings.Repeat("x", 10), 3); !slices.Contains([]string{"xxxxxxxxxx"}, got) {
		t.Errorf("lastLines = %q", got)
	}
}
