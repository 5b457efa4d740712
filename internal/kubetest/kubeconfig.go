package kubetest

import (
	"encoding/json"
	"fmt"
	"os"
)

// The kubeconfig is written as JSON (valid YAML) from these few types, which keeps
// k8s.io/client-go/tools/clientcmd and its dependencies out of the module graph.
type kubeconfigFile struct {
	APIVersion     string            `json:"apiVersion"`
	Kind           string            `json:"kind"`
	Clusters       []kubeconfigNamed `json:"clusters"`
	Users          []kubeconfigNamed `json:"users"`
	Contexts       []kubeconfigNamed `json:"contexts"`
	CurrentContext string            `json:"current-context"`
	Preferences    struct{}          `json:"preferences"`
}

type kubeconfigNamed struct {
	Name    string             `json:"name"`
	Cluster *kubeconfigCluster `json:"cluster,omitempty"`
	User    *kubeconfigUser    `json:"user,omitempty"`
	Context *kubeconfigContext `json:"context,omitempty"`
}

type kubeconfigCluster struct {
	Server                   string `json:"server"`
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"` // base64 by encoding/json, as kubeconfig expects
}

type kubeconfigUser struct {
	Token string `json:"token,omitempty"`
}

type kubeconfigContext struct {
	Cluster   string `json:"cluster"`
	User      string `json:"user"`
	Namespace string `json:"namespace,omitempty"`
}

// WriteKubeconfig writes a kubeconfig for one token user of the server at host, trusting the
// PEM certificates caData (none: the system's roots, or plain HTTP). An empty token sends no
// credentials, for a proxy that adds its own.
func WriteKubeconfig(path, host string, caData []byte, userName, token string) error {
	const cluster, context = "kubetest", "kubetest"
	cfg := kubeconfigFile{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []kubeconfigNamed{{Name: cluster, Cluster: &kubeconfigCluster{Server: host, CertificateAuthorityData: caData}}},
		Users:          []kubeconfigNamed{{Name: userName, User: &kubeconfigUser{Token: token}}},
		Contexts:       []kubeconfigNamed{{Name: context, Context: &kubeconfigContext{Cluster: cluster, User: userName, Namespace: "default"}}},
		CurrentContext: context,
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
