// Package auth owns credentials: bcrypt password hashing and the password
// rules, login sessions (idle timeout, absolute lifetime, CSRF token) and
// named API tokens, both random bearer secrets of which only a SHA-256 hash
// is stored, resolving a secret to the authz.Principal calling, login
// throttling, and the bootstrap admin account. Sessions live in SQL, so a
// revoked session stops working at once on every replica.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/store"
)

// AdminUsername is the name of the account EnsureAdmin creates.
const AdminUsername = "admin"

// ErrInvalidCredentials is returned by Login for an unknown user or a wrong
// password (deliberately indistinguishable).
var ErrInvalidCredentials = errors.New("invalid username or password")

// ErrInvalidToken is returned by Authenticate for a missing, unknown or
// expired token.
var ErrInvalidToken = errors.New("invalid or expired token")

// maxPasswordBytes is bcrypt's input limit.
const maxPasswordBytes = 72

// HashPassword returns the bcrypt hash of password.
func HashPassword(password string) (string, error) {
	if password == "" {
		return "", errors.New("auth: password is empty")
	}
	if len(password) > maxPasswordBytes {
		return "", fmt.Errorf("auth: password is longer than %d bytes", maxPasswordBytes)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("auth: hash password: %w", err)
	}
	return string(h), nil
}

// CheckPassword reports whether password matches the bcrypt hash.
func CheckPassword(hash, password string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// NewToken returns a fresh bearer token (32 random bytes, base64url without
// padding) and its hash (HashToken), which is the only form ever stored.
func NewToken() (token, hash string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error (Go ≥ 1.24)
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken is the hex SHA-256 of a bearer token, the key tokens are stored
// and looked up by.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// RandomPassword returns a random 24-character password (18 random bytes,
// base64url).
func RandomPassword() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// UserCreator is the part of the store EnsureAdmin needs.
type UserCreator interface {
	CountUsers(ctx context.Context) (int, error)
	CreateUser(ctx context.Context, u *store.User) error
}

// EnsureAdmin creates the user "admin" with role admin when no user exists
// yet. It uses password, or a random one when password is empty, and returns
// the password it set so the caller can show it once. When users already
// exist it changes nothing and returns created=false and an empty password.
// Two replicas racing here are safe: the loser gets store.ErrConflict, which
// is reported as created=false.
func EnsureAdmin(ctx context.Context, s UserCreator, password string) (created bool, pw string, err error) {
	n, err := s.CountUsers(ctx)
	if err != nil {
		return false, "", fmt.Errorf("auth: count users: %w", err)
	}
	if n > 0 {
		return false, "", nil
	}
	if password == "" {
		password = RandomPassword()
	}
	hash, err := HashPassword(password)
	if err != nil {
		return false, "", err
	}
	u := &store.User{Username: AdminUsername, PasswordHash: hash, Role: store.RoleAdmin}
	if err := s.CreateUser(ctx, u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return false, "", nil
		}
		return false, "", fmt.Errorf("auth: create admin user: %w", err)
	}
	return true, password, nil
}

// MinPasswordChars is the shortest password ValidatePassword accepts.
const MinPasswordChars = 10

// ValidatePassword returns what is wrong with password as the password of
// username, or "" when it is acceptable: at least MinPasswordChars
// characters, at most 72 bytes (bcrypt), and not the user name.
func ValidatePassword(username, password string) string {
	switch {
	case utf8.RuneCountInString(password) < MinPasswordChars:
		return fmt.Sprintf("password must be at least %d characters", MinPasswordChars)
	case len(password) > maxPasswordBytes:
		return fmt.Sprintf("password must be at most %d bytes", maxPasswordBytes)
	case strings.EqualFold(password, username):
		return "password must not be the user name"
	}
	return ""
}

// TokenPrefix starts every API token secret, telling it apart from a
// session token.
const TokenPrefix = "cxt_"

// NewAPIToken returns a fresh API token secret (TokenPrefix + 32 random
// bytes) and its hash.
func NewAPIToken() (secret, hash string) {
	t, _ := NewToken()
	secret = TokenPrefix + t
	return secret, HashToken(secret)
}

// Store is the part of the SQL store sessions and tokens need.
type Store interface {
	UserByName(ctx context.Context, username string) (*store.User, error)
	CreateSession(ctx context.Context, s *store.Session) error
	SessionByHash(ctx context.Context, tokenHash string, now time.Time, idle time.Duration) (*store.Session, *store.User, error)
	TouchSession(ctx context.Context, tokenHash string, now time.Time) error
	AccessTokenByHash(ctx context.Context, tokenHash string, now time.Time) (*store.AccessToken, *store.User, error)
	TouchAccessToken(ctx context.Context, id int64, now time.Time) error
}

// Default session limits.
const (
	DefaultSessionIdleTimeout = 2 * time.Hour
	DefaultSessionMaxLifetime = 24 * time.Hour
)

// Sessions issues and resolves login sessions and API tokens.
type Sessions struct {
	// Store is the SQL record. Required.
	Store Store
	// IdleTimeout ends a session not used for that long; 0 = DefaultSessionIdleTimeout.
	IdleTimeout time.Duration
	// MaxLifetime ends a session that long after login; 0 = DefaultSessionMaxLifetime.
	MaxLifetime time.Duration
	// Logger receives the API token uses that could not be recorded; nil
	// discards.
	Logger *slog.Logger
}

func (s *Sessions) idle() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return DefaultSessionIdleTimeout
}

func (s *Sessions) lifetime() time.Duration {
	if s.MaxLifetime > 0 {
		return s.MaxLifetime
	}
	return DefaultSessionMaxLifetime
}

// LoginResult is a new session.
type LoginResult struct {
	// Token is the session secret (cookie value or bearer token), shown once.
	Token     string
	CSRFToken string
	ExpiresAt time.Time
	User      *store.User
}

// Login checks username and password and opens a session at now. It
// returns ErrInvalidCredentials for an unknown user, a wrong password or a
// disabled user (indistinguishable).
func (s *Sessions) Login(ctx context.Context, username, password string, now time.Time) (*LoginResult, error) {
	u, err := s.Store.UserByName(ctx, username)
	if errors.Is(err, store.ErrNotFound) {
		_ = bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return nil, ErrInvalidCredentials
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up user: %w", err)
	}
	if !CheckPassword(u.PasswordHash, password) || u.Disabled {
		return nil, ErrInvalidCredentials
	}
	token, hash := NewToken()
	csrf, _ := NewToken()
	sess := &store.Session{TokenHash: hash, UserID: u.ID, CSRFToken: csrf, CreatedAt: now, LastSeenAt: now,
		ExpiresAt: now.Add(s.lifetime())}
	if err := s.Store.CreateSession(ctx, sess); err != nil {
		return nil, fmt.Errorf("auth: store session: %w", err)
	}
	return &LoginResult{Token: token, CSRFToken: csrf, ExpiresAt: sess.ExpiresAt, User: u}, nil
}

// dummyHash is compared against when the user does not exist, so that an
// unknown user name costs the same time as a wrong password.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("cronix-dummy-password"), bcrypt.DefaultCost)
	return h
})

// Resolve returns the principal a bearer secret (session token or API
// token) stands for at now, or ErrInvalidToken. A session's last use is
// recorded at most every touchEvery, so the idle timeout is exact to that;
// an API token's at most every tokenTouchEvery.
func (s *Sessions) Resolve(ctx context.Context, secret string, now time.Time) (*authz.Principal, error) {
	if secret == "" {
		return nil, ErrInvalidToken
	}
	hash := HashToken(secret)
	if strings.HasPrefix(secret, TokenPrefix) {
		t, u, err := s.Store.AccessTokenByHash(ctx, hash, now)
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrInvalidToken
		}
		if err != nil {
			return nil, fmt.Errorf("auth: look up API token: %w", err)
		}
		if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= tokenTouchEvery {
			// last_used_at only informs people: a busy or failing writer
			// must not turn away a request the token may make.
			if err := s.Store.TouchAccessToken(ctx, t.ID, now); err != nil && s.Logger != nil {
				s.Logger.Warn("API token use not recorded", "token_id", t.ID, "error", err)
			}
		}
		role := authz.Lower(t.Role, u.Role)
		var groups []int64
		for _, g := range t.Groups {
			if slices.Contains(u.Groups, g) || u.Role == store.RoleAdmin {
				groups = append(groups, g)
			}
		}
		return &authz.Principal{Kind: authz.KindToken, UserID: u.ID, Username: u.Username, Role: role,
			Groups: groups, TokenID: t.ID}, nil
	}
	sess, u, err := s.Store.SessionByHash(ctx, hash, now, s.idle())
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrInvalidToken
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up session: %w", err)
	}
	if now.Sub(sess.LastSeenAt) >= s.touchEvery() {
		if err := s.Store.TouchSession(ctx, hash, now); err != nil {
			return nil, fmt.Errorf("auth: record session use: %w", err)
		}
	}
	return &authz.Principal{Kind: authz.KindSession, UserID: u.ID, Username: u.Username, Role: u.Role,
		Groups: u.Groups, SessionHash: hash, CSRFToken: sess.CSRFToken}, nil
}

// tokenTouchEvery is how stale an API token's recorded last use may be
// before a request rewrites it.
const tokenTouchEvery = time.Minute

// touchEvery is how stale a session's last use may be before it is
// rewritten: a twentieth of the idle timeout, at most a minute.
func (s *Sessions) touchEvery() time.Duration {
	return min(s.idle()/20, time.Minute)
}
