package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Snapshots live in the runtime's registry, and are recorded in the
// cluster (snapshot.go). The engines push and pull them; deleting one is
// the registry's own HTTP API (the Docker Registry HTTP API V2, as
// Docker's distribution registry serves it), which bottlefile calls
// itself:
//
//	DELETE /v2/NAME/manifests/DIGEST     a snapshot, and the tags on it
//
// (repositories and tags list the catalog, for tests and tools).
// Deleting needs the registry's delete enabled (distribution's
// storage.delete.enabled: true); it frees the manifest and its tags, and
// the registry's garbage collection frees the layers. No credentials are
// sent: a registry that asks for them is not supported yet.

// attrRegistryURL is the runtime block's attribute for where bottlefile
// reaches the registry's API, when not at https://REGISTRY.
const attrRegistryURL = "registry_url"

// checkRegistryURL accepts an http or https URL with a host and no path
// beyond "/".
func checkRegistryURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL of a registry, like %q", s, "https://registry.internal:5000")
	}
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf("%q has a path: give the registry's root URL (its API is under /v2/)", s)
	}
	return nil
}

// registryAPI is the registry's HTTP API as bottlefile calls it.
type registryAPI struct {
	// registry is the runtime's registry attribute: HOST[:PORT][/PATH].
	registry string
	// base is the API's root, "https://HOST[:PORT]"; "" until first
	// found (fixed is false): https, unless the registry answers plain
	// HTTP (as the engines reach a registry they call insecure), or a
	// loopback one, which engines reach over plain HTTP.
	mu    sync.Mutex
	base  string
	fixed bool
	hc    *http.Client
	// timeout bounds each request (node_timeout, bounds.go).
	timeout time.Duration
}

func newRegistryAPI(registry, apiURL string, timeout time.Duration) *registryAPI {
	if timeout <= 0 {
		timeout = defaultNodeTimeout
	}
	r := &registryAPI{registry: registry, timeout: timeout, hc: &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}}
	if apiURL != "" {
		r.base, r.fixed = strings.TrimSuffix(apiURL, "/"), true
	}
	return r
}

// host is the registry's host and port, and prefix its path (the
// repositories' common prefix, "" or "team/").
func (r *registryAPI) host() (host, prefix string) {
	host, path, _ := strings.Cut(r.registry, "/")
	if path != "" {
		prefix = path + "/"
	}
	return host, prefix
}

// registryError is an answer of the registry other than the one
// expected.
type registryError struct {
	Status int
	Msg    string
}

func (e *registryError) Error() string { return e.Msg }

// do sends a request to the API; path starts with /v2/.
func (r *registryAPI) do(ctx context.Context, method, path string, header http.Header) (*http.Response, error) {
	r.mu.Lock()
	base, fixed := r.base, r.fixed
	r.mu.Unlock()
	try := func(base string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
		if err != nil {
			return nil, err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := r.hc.Do(req)
		var ne net.Error
		if err != nil && errors.As(err, &ne) && ne.Timeout() {
			err = fmt.Errorf("the registry %s did not answer within %v (node_timeout of the runtime block): is it down or partitioned? (%v)", r.registry, r.timeout, err)
		}
		return resp, err
	}
	if fixed {
		return try(base)
	}
	host, _ := r.host()
	secure, plain := "https://"+host, "http://"+host
	if isLoopback(host) {
		secure = plain
	}
	resp, err := try(secure)
	if err != nil && secure != plain && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		secure = plain
		resp, err = try(plain)
	}
	if err == nil {
		r.mu.Lock()
		r.base, r.fixed = secure, true
		r.mu.Unlock()
	}
	return resp, err
}

func isLoopback(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// get sends a GET and decodes a JSON answer into out; it returns the
// response's headers.
func (r *registryAPI) get(ctx context.Context, path string, header http.Header, out any) (http.Header, error) {
	resp, err := r.do(ctx, http.MethodGet, path, header)
	if err != nil {
		return nil, fmt.Errorf("asking the registry %s: %w", r.registry, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.Header, statusError(r.registry, http.MethodGet, path, resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return resp.Header, fmt.Errorf("reading the registry's answer to GET %s: %w", path, err)
	}
	return resp.Header, nil
}

func statusError(registry, method, path string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(body))
	var e struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Errors) > 0 {
		msg = e.Errors[0].Code + ": " + e.Errors[0].Message
	}
	return &registryError{Status: resp.StatusCode, Msg: fmt.Sprintf("the registry %s answered %s %s with %s (%s)", registry, method, path, resp.Status, msg)}
}

func isStatus(err error, status int) bool {
	var re *registryError
	return errors.As(err, &re) && re.Status == status
}

// repositories lists the registry's repositories whose name (without the
// registry's path) starts with prefix and ends with suffix, following the
// catalog's pages.
func (r *registryAPI) repositories(ctx context.Context, prefix, suffix string) ([]string, error) {
	_, base := r.host()
	var out []string
	path := "/v2/_catalog?n=1000"
	for path != "" {
		var page struct {
			Repositories []string `json:"repositories"`
		}
		h, err := r.get(ctx, path, nil, &page)
		if err != nil {
			return nil, err
		}
		for _, repo := range page.Repositories {
			name, ok := strings.CutPrefix(repo, base)
			if ok && strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) {
				out = append(out, name)
			}
		}
		path = nextPage(h.Get("Link"))
	}
	return out, nil
}

// nextPage is the path of a Link header's next page: `</v2/_catalog?last=x&n=1000>; rel="next"`.
func nextPage(link string) string {
	if link == "" || !strings.Contains(link, `rel="next"`) {
		return ""
	}
	start, end := strings.IndexByte(link, '<'), strings.IndexByte(link, '>')
	if start < 0 || end < start {
		return ""
	}
	u, err := url.Parse(link[start+1 : end])
	if err != nil {
		return ""
	}
	return u.RequestURI()
}

// tags lists a repository's tags; none when it has none or is gone.
func (r *registryAPI) tags(ctx context.Context, repo string) ([]string, error) {
	_, base := r.host()
	var list struct {
		Tags []string `json:"tags"`
	}
	if _, err := r.get(ctx, "/v2/"+base+repo+"/tags/list", nil, &list); err != nil {
		if isStatus(err, http.StatusNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return list.Tags, nil
}

// manifestTypes are the manifests the engines push.
var manifestTypes = []string{
	"application/vnd.docker.distribution.manifest.v2+json",
	"application/vnd.oci.image.manifest.v1+json",
}

// deleteManifest deletes a manifest by digest, and with it the tags that
// name it; one already gone is no error.
func (r *registryAPI) deleteManifest(ctx context.Context, repo, digest string) error {
	_, base := r.host()
	path := "/v2/" + base + repo + "/manifests/" + digest
	resp, err := r.do(ctx, http.MethodDelete, path, nil)
	if err != nil {
		return fmt.Errorf("asking the registry %s to delete %s@%s: %w", r.registry, repo, digest, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusAccepted, http.StatusOK, http.StatusNotFound:
		return nil
	case http.StatusMethodNotAllowed:
		return fmt.Errorf("the registry %s does not allow deletes, so snapshots cannot be removed from it: enable them in its configuration (distribution's storage.delete.enabled: true)", r.registry)
	}
	return statusError(r.registry, http.MethodDelete, path, resp)
}

// digestOf is the digest of the manifest a tag names; "" when the
// repository has no such tag.
func (r *registryAPI) digestOf(ctx context.Context, repo, tag string) (string, error) {
	_, base := r.host()
	path := "/v2/" + base + repo + "/manifests/" + tag
	resp, err := r.do(ctx, http.MethodHead, path, http.Header{"Accept": manifestTypes})
	if err != nil {
		return "", fmt.Errorf("asking the registry %s for %s:%s: %w", r.registry, repo, tag, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return resp.Header.Get("Docker-Content-Digest"), nil
	case http.StatusNotFound:
		return "", nil
	}
	return "", statusError(r.registry, http.MethodHead, path, resp)
}

// deleteTagged deletes from the registry the manifest repo:tag names, by
// its digest, unless another tag of the repository names the same one
// (a build of the same content under a newer hash). A tag already gone
// is no error.
func (r *registryAPI) deleteTagged(ctx context.Context, repo, tag string) error {
	digest, err := r.digestOf(ctx, repo, tag)
	if err != nil || digest == "" {
		return err
	}
	tags, err := r.tags(ctx, repo)
	if err != nil {
		return err
	}
	for _, other := range tags {
		if other == tag {
			continue
		}
		if d, err := r.digestOf(ctx, repo, other); err != nil {
			return err
		} else if d == digest {
			return nil // still named by a tag in use
		}
	}
	return r.deleteManifest(ctx, repo, digest)
}
