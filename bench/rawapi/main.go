// Command rawapi is the raw-API baseline of bench/real-engine.sh: it makes
// what `bottlefile apply` makes for N agents (per agent an internal bridge
// network with an explicit /28 subnet and no host address, and a container
// with an init process on it, created and started) straight through the
// Docker engine API, with no plan, no state and no checks, running at most
// -parallelism operations at once, as bottlefile's executor does: a
// network create is one operation, a container create and start another,
// started once its network exists.
//
// With -gateways it also makes what an agent's egress gateway costs: one
// shared bridge network (like a runtime's egress network, an explicit /24
// from -egress-subnet), and per agent a second container on the agent's
// network, connected to the shared one, then started.
//
//	rawapi -n 20 -image IMG -label k=v -prefix bench-raw -subnet 10.220.0.0/16
//	rawapi -destroy -label k=v
//
// Everything it makes carries -label, and -destroy removes by that label.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

func main() {
	n := flag.Int("n", 20, "number of agents")
	parallelism := flag.Int("parallelism", 10, "operations at once")
	image := flag.String("image", "", "image of the containers")
	label := flag.String("label", "", "label KEY=VALUE put on everything (required)")
	prefix := flag.String("prefix", "bench-raw", "name prefix")
	pool := flag.String("subnet", "10.220.0.0/16", "pool the /28 subnets are taken from, in order")
	gateways := flag.Bool("gateways", false, "also make a shared egress network and a gateway container per agent")
	egressPool := flag.String("egress-subnet", "10.221.0.0/24", "subnet of the shared egress network (-gateways)")
	destroy := flag.Bool("destroy", false, "remove every container and network carrying -label")
	flag.Parse()
	key, value, ok := strings.Cut(*label, "=")
	if !ok || key == "" {
		fail(fmt.Errorf("-label KEY=VALUE is required"))
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		fail(err)
	}
	defer cli.Close()
	ctx := context.Background()
	start := time.Now()
	if *destroy {
		err = remove(ctx, cli, *label, *parallelism)
	} else {
		if *image == "" {
			fail(fmt.Errorf("-image is required"))
		}
		o := options{n: *n, parallelism: *parallelism, image: *image, labels: map[string]string{key: value}, prefix: *prefix, pool: *pool}
		if *gateways {
			o.egressSubnet = *egressPool
		}
		err = create(ctx, cli, o)
	}
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "rawapi: done in %s\n", time.Since(start).Round(time.Millisecond))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rawapi:", err)
	os.Exit(1)
}

// options say what create makes.
type options struct {
	n, parallelism int
	image          string
	labels         map[string]string
	prefix, pool   string
	// egressSubnet, when set, adds the shared egress network and a gateway
	// container per agent.
	egressSubnet string
}

func create(ctx context.Context, cli *client.Client, o options) error {
	p, err := netip.ParsePrefix(o.pool)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		return fmt.Errorf("-subnet %q: want an IPv4 block of /28 or larger", o.pool)
	}
	base := p.Masked().Addr().As4()
	subnet := func(i int) string {
		v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
		v += uint32(i) * 16
		return fmt.Sprintf("%d.%d.%d.%d/28", v>>24, v>>16&0xff, v>>8&0xff, v&0xff)
	}
	sem := make(chan struct{}, o.parallelism)
	op := func(fn func() error) error {
		sem <- struct{}{}
		defer func() { <-sem }()
		return fn()
	}
	// runContainer creates a container on onNet, connects it to also (when
	// set), and starts it.
	runContainer := func(name, onNet, also string) error {
		useInit := true
		created, err := cli.ContainerCreate(ctx,
			&container.Config{Image: o.image, Cmd: []string{"sleep", "600"}, Labels: o.labels},
			&container.HostConfig{Init: &useInit, NetworkMode: container.NetworkMode(onNet), DNSOptions: []string{"timeout:1", "attempts:1"}},
			&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{onNet: {}}},
			nil, name)
		if err != nil {
			return fmt.Errorf("container %s: %w", name, err)
		}
		if also != "" {
			if err := cli.NetworkConnect(ctx, also, created.ID, &network.EndpointSettings{}); err != nil {
				return fmt.Errorf("connecting container %s to %s: %w", name, also, err)
			}
		}
		if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
			return fmt.Errorf("starting container %s: %w", name, err)
		}
		return nil
	}

	egress := ""
	if o.egressSubnet != "" {
		egress = o.prefix + "-egress"
		err := op(func() error {
			_, err := cli.NetworkCreate(ctx, egress, network.CreateOptions{
				Driver: "bridge",
				IPAM:   &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: o.egressSubnet}}},
				Labels: o.labels,
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("network %s: %w", egress, err)
		}
	}
	errs := make([]error, o.n)
	var wg sync.WaitGroup
	for i := range o.n {
		wg.Go(func() {
			net := fmt.Sprintf("%s-n%d", o.prefix, i)
			err := op(func() error {
				_, err := cli.NetworkCreate(ctx, net, network.CreateOptions{
					Driver:   "bridge",
					Internal: true,
					IPAM:     &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: subnet(i)}}},
					Options:  map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true"},
					Labels:   o.labels,
				})
				return err
			})
			if err != nil {
				errs[i] = fmt.Errorf("network %s: %w", net, err)
				return
			}
			var inner sync.WaitGroup
			var gwErr error
			if egress != "" {
				inner.Go(func() {
					gwErr = op(func() error { return runContainer(fmt.Sprintf("%s-g%d", o.prefix, i), net, egress) })
				})
			}
			err = op(func() error { return runContainer(fmt.Sprintf("%s-c%d", o.prefix, i), net, "") })
			inner.Wait()
			errs[i] = errors.Join(err, gwErr)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func remove(ctx context.Context, cli *client.Client, label string, parallelism int) error {
	f := filters.NewArgs(filters.Arg("label", label))
	ctrs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return err
	}
	nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return err
	}
	sem := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards errs
	var errs []string
	run := func(fn func() error) {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := fn(); err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		})
	}
	for _, c := range ctrs {
		run(func() error { return cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) })
	}
	wg.Wait()
	for _, n := range nets {
		run(func() error { return cli.NetworkRemove(ctx, n.ID) })
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
