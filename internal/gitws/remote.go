package gitws

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/factory-harness/factory/internal/proc"
)

// remoteSettings allow the transports a build's remote may use. Every
// other git call runs with protocol.allow=never; "ext" (which runs a
// command) stays forbidden here too.
var remoteSettings = []string{
	"-c", "protocol.file.allow=always",
	"-c", "protocol.ssh.allow=always",
	"-c", "protocol.https.allow=always",
	"-c", "protocol.http.allow=always",
	"-c", "protocol.git.allow=always",
}

// remoteEnvKeep are the variables a fetch or push needs beyond gitEnvKeep
// to reach a remote: the SSH agent and client, proxies and CA bundles.
var remoteEnvKeep = []string{
	"SSH_AUTH_SOCK", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSL_CAINFO", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}

func (r *Repo) remote(ctx context.Context, args ...string) ([]byte, error) {
	return r.remoteAuth(ctx, nil, args...)
}

// remoteAuth runs a fetch or push with auth added to its environment.
func (r *Repo) remoteAuth(ctx context.Context, auth Auth, args ...string) ([]byte, error) {
	var extra []string
	for _, name := range remoteEnvKeep {
		if v, ok := os.LookupEnv(name); ok {
			extra = append(extra, name+"="+v)
		}
	}
	return runGit(ctx, r.Root, gitEnv(false, append(extra, auth...)...), r.pinned(), append(append([]string{}, remoteSettings...), args...)...)
}

// Auth is environment for the one git process that talks to a remote:
// configuration through GIT_CONFIG_COUNT/_KEY_n/_VALUE_n (a forge's
// Authorization header, say), so a secret is never on a command line,
// which other users' ps shows, nor in .git/config.
type Auth []string

// ConfigAuth gives git the settings key=value (in order) through the
// environment.
func ConfigAuth(kv ...[2]string) Auth {
	a := Auth{fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(kv))}
	for i, p := range kv {
		a = append(a, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, p[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, p[1]))
	}
	return a
}

// RemoteURL returns the URL of the remote called name.
func (r *Repo) RemoteURL(ctx context.Context, name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "-") {
		return "", fmt.Errorf("%q is not a remote's name", name)
	}
	out, err := r.query(ctx, "remote", "get-url", "--", name)
	if err != nil {
		return "", fmt.Errorf("the repository %s has no remote %q (git remote -v lists them): %w", r.Root, name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// RemoteTip returns the commit url's branch is at, and false when the
// remote has no such branch; it asks the remote (git ls-remote).
func (r *Repo) RemoteTip(ctx context.Context, url, branch string, auth Auth) (string, bool, error) {
	ref := "refs/heads/" + branch
	out, err := r.remoteAuth(ctx, auth, "ls-remote", "--", url, ref)
	if err != nil {
		return "", false, fmt.Errorf("ask %s for %s: %w", url, branch, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if hash, name, ok := strings.Cut(line, "\t"); ok && name == ref {
			return hash, true, nil
		}
	}
	return "", false, nil
}

// IsAncestor reports whether commit a is an ancestor of (or is) commit
// b; false as well when a is not in this repository.
func (r *Repo) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	if _, ok, err := r.LookupCommit(ctx, a); err != nil || !ok {
		return false, err
	}
	_, err := r.query(ctx, "merge-base", "--is-ancestor", a, b)
	var re *proc.RunError
	if errors.As(err, &re) && re.ExitCode == 1 {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("is %s an ancestor of %s in %s: %w", ShortHash(a), ShortHash(b), r.Root, err)
	}
	return true, nil
}

// RemoteRef is where Fetch keeps a remote branch: refs/remotes/origin/<branch>
// (HEAD for the remote's HEAD).
func RemoteRef(branch string) string { return "refs/remotes/origin/" + branch }

// OpenCache opens the work tree dir, a worker's copy of a remote, creating
// it (git init, no commit) when it does not exist.
func OpenCache(ctx context.Context, dir string) (*Repo, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create repository %s: %w", dir, err)
		}
		if _, err := runGit(ctx, dir, gitEnv(false), nil, "init", "-q", "."); err != nil {
			return nil, fmt.Errorf("git init %s: %w", dir, err)
		}
	}
	return Open(ctx, dir)
}

// Fetch brings url's branches to RemoteRef(branch) and its HEAD to
// RemoteRef("HEAD"), removing the refs of branches deleted there.
func (r *Repo) Fetch(ctx context.Context, url string) error {
	if _, err := r.remote(ctx, "fetch", "-q", "--prune", "--no-tags", "--", url,
		"+refs/heads/*:refs/remotes/origin/*", "+HEAD:"+RemoteRef("HEAD")); err != nil {
		return fmt.Errorf("fetch %s into %s: %w", url, r.Root, err)
	}
	return nil
}

// ResolveRemote returns the commit rev names after a Fetch: a remote
// branch, "HEAD" (the remote's), or a commit hash.
func (r *Repo) ResolveRemote(ctx context.Context, rev string) (string, error) {
	for _, name := range []string{RemoteRef(rev), rev} {
		if strings.HasPrefix(name, "-") {
			continue
		}
		out, err := r.query(ctx, "rev-parse", "-q", "--verify", name+"^{commit}")
		if err == nil {
			return strings.TrimSpace(string(out)), nil
		}
	}
	return "", fmt.Errorf("%q is neither a branch of the remote nor a commit it has", rev)
}

// RemoteBranch returns the commit Fetch last saw url's branch at, and
// false when the remote has no such branch.
func (r *Repo) RemoteBranch(ctx context.Context, branch string) (string, bool, error) {
	return r.LookupCommit(ctx, RemoteRef(branch))
}

// LookupCommit returns the commit rev names, and false when there is no
// such ref or commit.
func (r *Repo) LookupCommit(ctx context.Context, rev string) (string, bool, error) {
	out, err := r.query(ctx, "rev-parse", "-q", "--verify", rev+"^{commit}")
	if err != nil {
		var re *proc.RunError
		if errors.As(err, &re) && re.ExitCode == 1 {
			return "", false, nil
		}
		return "", false, fmt.Errorf("look up %s in %s: %w", rev, r.Root, err)
	}
	return strings.TrimSpace(string(out)), true, nil
}

// CheckoutAt puts branch at commit and checks it out, as the start of a
// step of a build on a worker. The tree must be clean.
func (r *Repo) CheckoutAt(ctx context.Context, branch, commit string) error {
	if _, err := r.mutate(ctx, "checkout", "-q", "-B", branch, commit, "--"); err != nil {
		return fmt.Errorf("check out %s at %s in %s: %w", branch, ShortHash(commit), r.Root, err)
	}
	return nil
}

// ErrPushRejected is returned (wrapped) by PushLease when the remote
// branch is no longer where the caller expected it.
var ErrPushRejected = errors.New("the remote branch moved")

// PushLease sets url's branch to commit only if it still points at
// expected ("" meaning: the branch does not exist). git's
// --force-with-lease makes this a compare-and-swap on the remote side, so
// a writer that started from an older state can never overwrite newer
// work; a refusal wraps ErrPushRejected.
func (r *Repo) PushLease(ctx context.Context, url, branch, commit, expected string) error {
	return r.PushLeaseAuth(ctx, url, branch, commit, expected, nil)
}

// PushLeaseAuth is PushLease with auth in git's environment.
func (r *Repo) PushLeaseAuth(ctx context.Context, url, branch, commit, expected string, auth Auth) error {
	ref := "refs/heads/" + branch
	_, err := r.remoteAuth(ctx, auth, "push", "-q", "--force-with-lease="+ref+":"+expected, "--", url, commit+":"+ref)
	if err != nil {
		var re *proc.RunError
		if errors.As(err, &re) && (strings.Contains(re.Stderr, "stale info") || strings.Contains(re.Stderr, "rejected") ||
			strings.Contains(re.Stderr, "fetch first") || strings.Contains(re.Stderr, "non-fast-forward")) {
			return fmt.Errorf("push %s to %s: %w (expected %s): %v", branch, url, ErrPushRejected, orNone(expected), err)
		}
		return fmt.Errorf("push %s to %s: %w", branch, url, err)
	}
	return nil
}

func orNone(commit string) string {
	if commit == "" {
		return "no branch"
	}
	return ShortHash(commit)
}

// FetchRefs brings url's refs under prefix (such as refs/factory/<plan
// hash>/) to the same names here, replacing what they held; none there is
// no error.
func (r *Repo) FetchRefs(ctx context.Context, url, prefix string) error {
	if _, err := r.remote(ctx, "fetch", "-q", "--no-tags", "--", url, "+"+prefix+"*:"+prefix+"*"); err != nil {
		return fmt.Errorf("fetch %s* of %s into %s: %w", prefix, url, r.Root, err)
	}
	return nil
}

// PushRef sets url's ref (a full name outside refs/heads, such as
// refs/factory/<plan hash>/WO-01) to commit, whatever it held.
func (r *Repo) PushRef(ctx context.Context, url, ref, commit string) error {
	if _, err := r.remote(ctx, "push", "-q", "--force", "--", url, commit+":"+ref); err != nil {
		return fmt.Errorf("push %s to %s of %s: %w", ShortHash(commit), ref, url, err)
	}
	return nil
}
