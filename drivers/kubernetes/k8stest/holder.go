package k8stest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

// holder is the first process of the cluster's namespaces: unshare (in
// the new network, mount and UTS namespaces), whose child (Child, found
// by spawnHolder) is PID 1 of the new PID namespace. Every daemon is
// started inside with nsenter; when the child dies (unshare's death
// kills it) the kernel kills them all.
type holder struct {
	*nsfixture.Proc
	dir string
}

// holderScript runs as PID 1 of the cluster's namespaces: "$0" is its
// name, $1 the pause binary it becomes, $2 the daemons cgroup's procs
// file, $3 the cluster's directory. It waits for a line "NAME NODE-IP
// SERVICE-CIDR" (the veth's eth0 is in its namespace then), and makes the
// namespaces the node: the cgroup v1 hierarchies mounted again on a /sys
// of this network namespace; /run, /var/lib and /var/log of its own (the
// CRI's netns mounts, containerd's shim sockets, the kubelet's fixed
// paths); the global kernel settings the kubelet would write as read-only
// files holding the values it wants; eth0 with the node's address and a
// route to the Service range, no default route.
const holderScript = `set -e
read -r name ip svc
echo 0 > "$2"
cg=$(grep -E '^cgroup2? /sys/fs/cgroup/' /proc/self/mounts)
hostname "$name"
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
echo "$cg" | while read -r src mnt fstype opts rest; do
  mkdir -p "$mnt"
  o=$(echo "$opts" | tr , '\n' | grep -vE '^(rw|ro|relatime|nosuid|nodev|noexec)$' | paste -sd, -)
  if [ "$fstype" = cgroup2 ]; then mount -t cgroup2 cgroup2 "$mnt"; else mount -t cgroup -o "$o" cgroup "$mnt"; fi
done
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p "$3/var-lib" "$3/var-log" "$3/sysctl"
mount --bind "$3/var-lib" /var/lib
mount --bind "$3/var-log" /var/log
for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
    kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
  k=${kv%%=*}
  f="$3/sysctl/$(echo "$k" | tr / .)"
  echo "${kv#*=}" > "$f"
  mount --bind -o ro "$f" "/proc/sys/$k"
done
ip link set lo up
ip addr add "$ip/24" dev eth0
ip link set eth0 up
ip route add "$svc" dev eth0
echo ready > "$3/holder.ready"
exec "$1"
`

// spawnHolder starts the holder, killed when this process dies; it waits
// for release before it makes the node.
func spawnHolder(dir, pause, id string) (*holder, error) {
	procs := filepath.Join(nsfixture.CgroupRoot, "pids", kind.CgroupName(id), "daemons", "cgroup.procs")
	p, err := nsfixture.Spawn(dir, "holder", nil, "--net", "--uts", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
		"sh", "-c", holderScript, "k8stest-holder", pause, procs)
	if p == nil {
		return nil, err
	}
	h := &holder{Proc: p, dir: dir}
	if err != nil {
		return h, err
	}
	if err := nsfixture.WaitOwnNetns(h.PID, 10*time.Second); err != nil {
		return h, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.Child == 0 {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", h.PID, h.PID))
		if f := strings.Fields(string(data)); len(f) > 0 {
			h.Child, _ = strconv.Atoi(f[0])
			break
		}
		if time.Now().After(deadline) {
			return h, errors.New("the namespaces' first process did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return h, nil
}

// release lets the holder make the node, and waits until it has.
func (h *holder) release(name, ip, svc string) error {
	if _, err := fmt.Fprintf(h.Stdin, "%s %s %s\n", name, ip, svc); err != nil {
		return fmt.Errorf("releasing the namespaces: %w", err)
	}
	h.Stdin.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(h.dir, "holder.ready")); err == nil {
			return nil
		}
		select {
		case <-h.Done:
			return errors.New("the namespaces' first process exited while making the node")
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("the namespaces' first process did not make the node within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// command is a command run in the holder's network, mount, UTS and PID
// namespaces.
func (h *holder) command(args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"-t", strconv.Itoa(h.Child), "-n", "-m", "-u", "-p", "--"}, args...)...)
}
