package forge

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	"github.com/factory-harness/factory/internal/gitws"
)

// PushAuth is what the one git process that pushes to remoteURL gets in
// its environment: an Authorization header scoped to the remote's own
// scheme, host and port, and no redirects (a header must not follow one
// to another host). An SSH remote gets nothing: git uses the user's SSH
// setup. Plain HTTP is refused but on loopback, where nothing travels.
func PushAuth(k Kind, remoteURL, token string) (gitws.Auth, error) {
	u, err := url.Parse(remoteURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, nil // scp-like (git@host:path) or a local path: not HTTP
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return nil, fmt.Errorf("the remote %s is plain http on a host other than this machine: the token would travel in clear; use its https URL", Redact(remoteURL))
		}
	default:
		return nil, nil // ssh://, git://, file://
	}
	if u.User != nil {
		return nil, fmt.Errorf("the remote URL %s holds credentials; remove them (git remote set-url) — factory takes the token from %s", Redact(remoteURL), TokenVars(k)[0])
	}
	if token == "" {
		return nil, fmt.Errorf("no token: set %s", strings.Join(TokenVars(k), " or "))
	}
	user := "x-access-token" // GitHub's; Gitea takes any name with a token as password
	if k == GitLab {
		user = "oauth2"
	}
	scope := u.Scheme + "://" + u.Host + "/"
	header := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+token))
	return gitws.ConfigAuth(
		[2]string{"http." + scope + ".extraHeader", header},
		[2]string{"http." + scope + ".followRedirects", "false"},
		// The user's credential helpers are not asked, nor given anything.
		[2]string{"credential.helper", ""},
	), nil
}

// Redact returns rawURL without any user information, for messages.
func Redact(rawURL string) string { return withoutUser(rawURL) }
