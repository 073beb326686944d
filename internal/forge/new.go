package forge

import (
	"fmt"
	"net/http"
)

// New returns the client for t's forge. hc nil gives a client with sane
// timeouts; either way redirects are followed only within the API's own
// scheme, host and port, so the token never travels to another host
// (net/http drops Authorization only on a redirect to another domain, keeps
// it for another port or a subdomain, and never drops GitLab's
// PRIVATE-TOKEN).
func New(t Target, hc *http.Client) (Client, error) {
	a, err := newAPI(t, hc)
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case GitHub:
		return newGitHub(a)
	case Gitea:
		return newGitea(a)
	case GitLab:
		return newGitLab(a)
	}
	return nil, fmt.Errorf("unknown forge %q; pass --forge github|gitea|gitlab", t.Kind)
}
