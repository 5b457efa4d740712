package kubetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"strings"
)

// credential is one static-token identity known to the API server.
type credential struct {
	user   User
	token  string
	kubecf string // file name of its kubeconfig inside the temp dir
}

// newToken returns a random bearer token.
func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeTokenFile writes the --token-auth-file CSV: token,user,uid,"group1,group2".
func writeTokenFile(path string, creds []*credential) error {
	var b strings.Builder
	w := csv.NewWriter(&b)
	for i, c := range creds {
		record := []string{c.token, c.user.Name, fmt.Sprintf("kubetest-uid-%d", i), strings.Join(c.user.Groups, ",")}
		if err := w.Write(record); err != nil {
			return fmt.Errorf("encoding token file: %w", err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("encoding token file: %w", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	return nil
}

// writeServiceAccountKeys generates the RSA key pair the API server signs and verifies
// service-account tokens with, as PEM files.
func writeServiceAccountKeys(privatePath, publicPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	privateDER := x509.MarshalPKCS1PrivateKey(key)
	publicDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding service-account public key: %w", err)
	}
	privatePEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: privateDER})
	publicPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: publicDER})
	if err := os.WriteFile(privatePath, privatePEM, 0o600); err != nil {
		return fmt.Errorf("writing service-account private key: %w", err)
	}
	if err := os.WriteFile(publicPath, publicPEM, 0o600); err != nil {
		return fmt.Errorf("writing service-account public key: %w", err)
	}
	return nil
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1. All listeners are held open until
// every port is chosen, so the ports differ; another process may still take one before the
// child binds it, so callers retry on "address already in use" (Start does).
func FreePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
