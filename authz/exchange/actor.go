package exchange

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// maxCredentialBytes bounds the actor token and the client secret files.
const maxCredentialBytes = 16 << 10

// watchedFile is a small file read again whenever its size or modification
// time changes: a JWT-SVID rotated by the SPIFFE helper, a secret rotated
// by its operator. Safe for concurrent use.
type watchedFile struct {
	path string

	mu      sync.Mutex
	size    int64
	mod     time.Time
	content string
}

// read returns the file's content, trimmed of surrounding white space,
// reading it again if it changed since the last read.
func (f *watchedFile) read() (string, error) {
	info, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrActorCredential, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.content != "" && info.Size() == f.size && info.ModTime().Equal(f.mod) {
		return f.content, nil
	}
	if info.Size() > maxCredentialBytes {
		return "", fmt.Errorf("%w: %s is larger than %d bytes", ErrActorCredential, f.path, maxCredentialBytes)
	}
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrActorCredential, err)
	}
	content := string(bytes.TrimSpace(raw))
	if content == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrActorCredential, f.path)
	}
	f.size, f.mod, f.content = info.Size(), info.ModTime(), content
	return content, nil
}

// actorCredential is this agent's credential at the STS: HTTP Basic client
// credentials, an actor token, or both.
type actorCredential struct {
	clientID string
	secret   *watchedFile // with clientID
	file     *watchedFile // the actor token file, when set

	// The client_credentials actor token, when there is no file: obtained
	// from the STS and kept until refresh before its expiry.
	mu     sync.Mutex
	token  string
	expiry time.Time
}

// basic is the HTTP Basic credentials ("" when there are none).
func (a *actorCredential) basic() (id, secret string, err error) {
	if a.clientID == "" {
		return "", "", nil
	}
	secret, err = a.secret.read()
	return a.clientID, secret, err
}

// actorToken is the actor token and its type: the file's JWT, or a
// client_credentials token from the STS (obtained with fetch when the
// cached one is near its end).
func (a *actorCredential) actorToken(ctx context.Context, now time.Time, refreshBefore time.Duration,
	fetch func(context.Context) (tokenAnswer, error)) (string, string, error) {
	if a.file != nil {
		tok, err := a.file.read()
		if err != nil {
			return "", "", err
		}
		if strings.Count(tok, ".") != 2 || strings.ContainsAny(tok, " \t\r\n") {
			return "", "", fmt.Errorf("%w: %s does not hold one JWT", ErrActorCredential, a.file.path)
		}
		return tok, tokenTypeJWT, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token != "" && now.Before(a.expiry.Add(-refreshBefore)) {
		return a.token, tokenTypeAccessToken, nil
	}
	// Under the lock: concurrent exchanges that all need a new actor token
	// wait for one client_credentials call.
	ans, err := fetch(ctx)
	if err != nil {
		return "", "", err
	}
	a.token, a.expiry = ans.AccessToken, now
	if ans.ExpiresIn != nil && *ans.ExpiresIn > 0 {
		a.expiry = now.Add(time.Duration(*ans.ExpiresIn) * time.Second)
	}
	return a.token, tokenTypeAccessToken, nil
}

// clientCredentialsForm is the client_credentials grant's request.
func clientCredentialsForm() url.Values { return url.Values{"grant_type": {grantClientCredentials}} }
