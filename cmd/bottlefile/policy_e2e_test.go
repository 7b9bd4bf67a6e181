package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// operatorPolicyBottlefile is one agent on a runtime of the author's own: %[1]s
// is the runtime block's name, %[2]q its egress network, %[3]q the image
// and %[4]s the agent's allow list.
const operatorPolicyBottlefile = `
runtime %[1]q {
  driver         = "docker"
  egress_network = %[2]q
}

agent "coder" {
  runtime = runtime.%[1]s
  image   = %[3]q
  command = ["sleep", "3600"]
  egress {
    allow = %[4]s
  }
}
`

// TestE2EOperatorPolicy is issue 25's operator egress policy on the real
// engine. Under a policy file named by BOTTLEFILE_POLICY, a Bottlefile
// that adds an unrestricted runtime of its own and allows 0.0.0.0/0
// fails validate and plan at the rule, naming the policy file. Within the
// policy it applies, and the gateway runs with the policy as its ceiling.
// A rules file replaced by hand inside the gateway (docker cp, then
// SIGHUP, as the driver does) that opens a host outside the policy is
// refused by the gateway, which still refuses that host; the next plan
// shows the gateway's drift (status too), apply writes its rules again in
// place, and the plan after it is "No changes.". A changed policy replaces the
// gateway, as the plan says.
func TestE2EOperatorPolicy(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	r := &escapeRig{t: t, cli: cli, img: dockertest.BusyboxImage(t, cli), run: randomHex(4), dir: t.TempDir()}
	r.makeOutside()
	t.Cleanup(r.removeWorld)
	page := func(name string) []string {
		return []string{"sh", "-c", fmt.Sprintf("mkdir -p /www && echo %s > /www/index.html && exec httpd -f -p 8080 -h /www", name)}
	}
	r.allowedID, r.allowedIP = r.outsider("allowed-host", r.img, page("allowed-host-content"))
	_, r.deniedIP = r.outsider("denied-host", r.img, page("denied-host-content"))

	policyPath := filepath.Join(t.TempDir(), "policy.hcl")
	writePolicy := func(rules ...string) {
		t.Helper()
		if err := os.WriteFile(policyPath, []byte(fmt.Sprintf("egress_ceiling = [%s]\n", quoteAll(rules))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	policy := []string{"allowed-host:8080", r.allowedIP.String() + ":8080"}
	writePolicy(policy...)
	env := []string{"BOTTLEFILE_POLICY=" + policyPath}
	run := func(args ...string) result {
		t.Helper()
		return bottlefileEnv(t, r.dir, env, args...)
	}
	must := func(args ...string) result {
		t.Helper()
		res := run(args...)
		if res.code != 0 {
			t.Fatalf("bottlefile %s: %s", strings.Join(args, " "), res)
		}
		return res
	}

	// An unrestricted runtime of the author's own does not escape it.
	writeBottlefile(t, r.dir, operatorPolicyBottlefile, "free", r.outside, r.img,
		fmt.Sprintf("[\n      %q,\n      %q,\n      \"0.0.0.0/0:8080\",\n    ]", policy[0], policy[1]))
	for _, cmd := range []string{"validate", "plan"} {
		res := run(cmd)
		out := res.stdout + res.stderr
		if res.code == 0 {
			t.Fatalf("%s of a runtime without a ceiling allowing 0.0.0.0/0 under the policy: %s", cmd, res)
		}
		wantAll(t, cmd, out,
			"Error: Egress rule outside the operator's egress policy",
			"on Bottlefile line 15, in agent \"coder\"",
			`egress rule "0.0.0.0/0:8080" is outside the egress policy the`, policyPath)
		if strings.Count(out, "Error: ") != 1 {
			t.Errorf("%s: want the one error at the rule:\n%s", cmd, out)
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, ".bottlefile", "state.db")); err == nil {
		t.Error("a refused plan left a state")
	}

	// Within the policy: applied, and the gateway holds the ceiling.
	allow := fmt.Sprintf("[%s]", quoteAll(policy))
	writeBottlefile(t, r.dir, operatorPolicyBottlefile, "free", r.outside, r.img, allow)
	must("validate")
	res := must("plan")
	wantAll(t, "plan", res.stdout, "+ ceiling", policy[0])
	must("apply", "-auto-approve")
	r.lineage = lineageOf(t, cli, r.dir)
	agent, gw := r.find(t, "agent.coder"), r.find(t, "agent.coder.gateway")
	info, err := cli.ContainerInspect(context.Background(), gw.id)
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(info.Args, " "); !strings.Contains(args, "-ceiling "+strings.Join(policy, ",")) {
		t.Errorf("the gateway's arguments lack the ceiling: %s", args)
	}
	probes := []probe{
		{"allowed", viaProxy("http://allowed-host:8080/")},
		{"denied", viaProxy("http://denied-host:8080/")},
	}
	got := r.probeAll(t, agent.id, probes)
	wantContent(t, got, "allowed", "allowed-host-content")
	want403(t, got, "denied", "denied-host-content")
	if res := must("plan"); !strings.Contains(res.stdout, "No changes.") {
		t.Fatalf("plan after apply: %s", res)
	}

	// The rules file replaced by hand, opening a host outside the policy,
	// and the gateway told to read it.
	rules := fmt.Sprintf(`{"agent":"agent.coder","allow":[%s]}`+"\n",
		quoteAll(append(policy, "denied-host:8080", r.deniedIP.String()+":8080", "0.0.0.0/0:8080")))
	copyFileInto(t, cli, gw.id, "/etc/bottlefile", "rules.json", []byte(rules))
	if err := cli.ContainerKill(context.Background(), gw.id, "HUP"); err != nil {
		t.Fatal(err)
	}
	if !r.waitLog(t, gw.id, "outside the gateway's egress ceiling", 10*time.Second) {
		t.Fatalf("the gateway did not refuse the rules file; its log:\n%s", r.logs(t, gw.id))
	}
	got = r.probeAll(t, agent.id, probes)
	wantContent(t, got, "allowed", "allowed-host-content")
	want403(t, got, "denied", "denied-host-content")

	// status shows the drift too.
	res = must("status")
	wantAll(t, "status after tampering", res.stdout,
		"agent.coder.gateway: its rules differ from what was applied (changed outside bottlefile); the next apply writes them again.")
	res = must("status", "-json")
	wantAll(t, "status -json after tampering", res.stdout, `"drift": "its rules differ from what was applied (changed outside bottlefile)"`)

	// The next plan shows the drift; apply writes the rules again, in
	// place; the plan after is empty.
	res = must("plan")
	wantAll(t, "plan after tampering", res.stdout,
		"# agent.coder.gateway will be updated in place",
		"its rules differ from what was applied (changed outside bottlefile)",
		"Plan: 0 to add, 1 to change, 0 to destroy.")
	must("apply", "-auto-approve")
	if now := r.find(t, "agent.coder.gateway"); now.id != gw.id {
		t.Errorf("the gateway was replaced, not restored in place: %s -> %s", gw.id[:12], now.id[:12])
	}
	if res := must("plan"); !strings.Contains(res.stdout, "No changes.") {
		t.Errorf("plan after restoring: %s", res)
	}
	if res := must("status"); strings.Contains(res.stdout, "differ from what was applied") {
		t.Errorf("status after restoring still shows drift:\n%s", res.stdout)
	}
	if now := r.find(t, "agent.coder"); now.id != agent.id {
		t.Error("restoring the gateway touched the agent")
	}
	got = r.probeAll(t, agent.id, probes)
	wantContent(t, got, "allowed", "allowed-host-content")
	want403(t, got, "denied", "denied-host-content")

	// A narrower policy: the gateway is replaced to hold the new ceiling
	// (its command line cannot change in place), and the rule now outside
	// it is refused at plan.
	writePolicy(policy[0])
	res = run("plan")
	wantAll(t, "plan under a narrower policy", res.stdout+res.stderr,
		"Egress rule outside the operator's egress policy", fmt.Sprintf("%q", policy[1]))
	writePolicy(append(policy, "allowed-host:8081")...)
	res = must("plan")
	wantAll(t, "plan under a wider policy", res.stdout,
		"# agent.coder.gateway must be replaced", `"allowed-host:8081"] # forces replacement`)

	env = nil
	mustRun(t, r.dir, "destroy", "-auto-approve")
}

// quoteAll is strs as HCL or JSON string literals, comma-separated.
func quoteAll(strs []string) string {
	q := make([]string, len(strs))
	for i, s := range strs {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// copyFileInto writes one file into a container's directory, as docker cp
// does.
func copyFileInto(t *testing.T, cli *client.Client, id, dir, name string, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	tw.Write(data)
	tw.Close()
	if err := cli.CopyToContainer(context.Background(), id, dir, &buf, container.CopyToContainerOptions{}); err != nil {
		t.Fatalf("copying %s into %s: %v", name, id[:12], err)
	}
}
