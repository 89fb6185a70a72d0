// Package auth owns user credentials and API session tokens: bcrypt password
// hashing, random bearer tokens of which only a SHA-256 hash is stored, login
// and token lookup against the SQL store, and the bootstrap admin account.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

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

// SessionStore is the part of the store Login and Authenticate need.
type SessionStore interface {
	UserByName(ctx context.Context, username string) (*store.User, error)
	CreateToken(ctx context.Context, userID int64, tokenHash string, expiresAt time.Time) error
	UserByToken(ctx context.Context, tokenHash string, now time.Time) (*store.User, error)
}

// dummyHash is compared against when the user does not exist, so that an
// unknown user name costs the same time as a wrong password.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("cronix-dummy-password"), bcrypt.DefaultCost)
	return h
})

// Login checks username and password and issues a token valid until
// expiresAt. It returns ErrInvalidCredentials when either is wrong.
func Login(ctx context.Context, s SessionStore, username, password string, expiresAt time.Time) (string, error) {
	u, err := s.UserByName(ctx, username)
	if errors.Is(err, store.ErrNotFound) {
		_ = bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return "", ErrInvalidCredentials
	}
	if err != nil {
		return "", fmt.Errorf("auth: look up user: %w", err)
	}
	if !CheckPassword(u.PasswordHash, password) {
		return "", ErrInvalidCredentials
	}
	token, hash := NewToken()
	if err := s.CreateToken(ctx, u.ID, hash, expiresAt); err != nil {
		return "", fmt.Errorf("auth: store token: %w", err)
	}
	return token, nil
}

// Authenticate returns the user owning token if it is known and unexpired at
// now, or ErrInvalidToken.
func Authenticate(ctx context.Context, s SessionStore, token string, now time.Time) (*store.User, error) {
	if token == "" {
		return nil, ErrInvalidToken
	}
	u, err := s.UserByToken(ctx, HashToken(token), now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrInvalidToken
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up token: %w", err)
	}
	return u, nil
}
