# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: the cluster's certificates and kubeconfigs.
# Sourced by ci/testbed/lib.sh only.

# ------------------------------------------------------- certificates -------
# fl_cert <name> <subject> [serverAltNames]: an EC P-256 key and a certificate signed by the CA.
fl_cert() {
  local name=$1 subj=$2 sans=${3:-}
  if [ -n "$sans" ]; then
    fl_cert_by ca "$name" "$subj" serverAuth "$sans"
  else
    fl_cert_by ca "$name" "$subj" clientAuth
  fi
}

# fl_cert_usage_is <crt> <extendedKeyUsage>: does the certificate carry exactly these usages
# (serverAuth, clientAuth, comma-separated)? A kept certificate made with other usages is made again.
fl_cert_usage_is() {
  local usages=() names=() u have
  IFS=, read -ra usages <<<"$2"
  have=$(openssl x509 -in "$1" -noout -ext extendedKeyUsage 2>/dev/null | tail -n +2 | tr -d ' ')
  for u in "${usages[@]}"; do
    case $u in serverAuth) names+=("TLSWebServerAuthentication") ;; clientAuth) names+=("TLSWebClientAuthentication") ;; *) return 1 ;; esac
  done
  [ "$have" = "$(IFS=,; echo "${names[*]}")" ]
}

# fl_cert_by <ca> <name> <subject> <extendedKeyUsage> [serverAltNames]: a key and a certificate signed
# by $FL_PKI/<ca>.{crt,key}.
fl_cert_by() {
  local ca=$1 name=$2 subj=$3 usage=$4 sans=${5:-} ext
  [ -s "$FL_PKI/$name.crt" ] && [ -s "$FL_PKI/$name.key" ] && fl_cert_usage_is "$FL_PKI/$name.crt" "$usage" && return 0
  ext=$(mktemp)
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$usage" >"$ext"
  [ -z "$sans" ] || printf 'subjectAltName=%s\n' "$sans" >>"$ext"
  openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/$name.key" 2>/dev/null
  openssl req -new -key "$FL_PKI/$name.key" -subj "$subj" -out "$FL_PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$FL_PKI/$name.csr" -CA "$FL_PKI/$ca.crt" -CAkey "$FL_PKI/$ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "$ext" -out "$FL_PKI/$name.crt" 2>/dev/null
  rm -f "$ext" "$FL_PKI/$name.csr"
}

# fl_make_etcd_pki: etcd's own CA (as kubeadm's etcd/ca: a certificate the cluster's CA signs, which the
# controller-manager issues to anyone whose CSR is approved, must not open etcd), its serving and peer
# certificates, and the client certificate of the API server (also used by the health check).
fl_make_etcd_pki() {
  if [ ! -s "$FL_PKI/etcd-ca.crt" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/etcd-ca.key" 2>/dev/null
    openssl req -x509 -new -key "$FL_PKI/etcd-ca.key" -subj "/CN=faultlab-etcd-ca" -days 3650 -sha256 \
      -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
      -out "$FL_PKI/etcd-ca.crt" 2>/dev/null
  fi
  # Client use too, as kubeadm's etcd/server: etcd's own gateway connects to its client port with it
  # (without, etcd logs `certificate specifies an incompatible key usage` every few seconds).
  fl_cert_by etcd-ca etcd-server /CN=faultlab-etcd serverAuth,clientAuth "IP:127.0.0.1,DNS:localhost"
  fl_cert_by etcd-ca etcd-peer /CN=faultlab-etcd-peer serverAuth,clientAuth "IP:127.0.0.1,DNS:localhost"
  fl_cert_by etcd-ca apiserver-etcd-client /CN=kube-apiserver-etcd-client clientAuth
}

fl_make_pki() {
  mkdir -p "$FL_PKI"
  chmod 0700 "$FL_PKI"
  if [ ! -s "$FL_PKI/ca.crt" ]; then
    log "creating certificates in $FL_PKI"
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$FL_PKI/ca.key" -subj "/CN=faultlab-testbed-ca" -days 3650 -sha256 \
      -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
      -out "$FL_PKI/ca.crt" 2>/dev/null
  fi
  fl_cert apiserver "/CN=kube-apiserver" \
    "IP:$FL_HOST_IP,IP:127.0.0.1,IP:$FL_VM_HOST_ALIAS,IP:$FL_VM_FORWARD,IP:$FL_SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  fl_cert admin "/O=system:masters/CN=faultlab-admin"
  fl_cert controller-manager "/CN=system:kube-controller-manager"
  fl_cert scheduler "/CN=system:kube-scheduler"
  fl_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  fl_make_etcd_pki
  # Front-proxy (request header) CA, so the controllers' delegated authentication finds one.
  if [ ! -s "$FL_PKI/front-proxy-ca.crt" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/front-proxy-ca.key" 2>/dev/null
    openssl req -x509 -new -key "$FL_PKI/front-proxy-ca.key" -subj "/CN=faultlab-front-proxy-ca" -days 3650 -sha256 \
      -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
      -out "$FL_PKI/front-proxy-ca.crt" 2>/dev/null
  fi
  if [ ! -s "$FL_PKI/front-proxy-client.crt" ]; then
    local ext
    ext=$(mktemp)
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$ext"
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/front-proxy-client.key" 2>/dev/null
    openssl req -new -key "$FL_PKI/front-proxy-client.key" -subj /CN=front-proxy-client 2>/dev/null |
      openssl x509 -req -CA "$FL_PKI/front-proxy-ca.crt" -CAkey "$FL_PKI/front-proxy-ca.key" -CAcreateserial \
        -days 3650 -sha256 -extfile "$ext" -out "$FL_PKI/front-proxy-client.crt" 2>/dev/null
    rm -f "$ext"
  fi
  if [ ! -s "$FL_PKI/sa.key" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/sa.key" 2>/dev/null
    openssl ec -in "$FL_PKI/sa.key" -pubout -out "$FL_PKI/sa.pub" 2>/dev/null
  fi
}

# fl_write_if_changed <file> <mode>: stdin -> file, only when the content differs.
# Returns 0 when the file was (re)written, 1 when it was already up to date.
fl_write_if_changed() {
  local f=$1 mode=${2:-0644} tmp
  mkdir -p "$(dirname "$f")"
  tmp=$(mktemp "$f.XXXXXX")
  cat >"$tmp"
  chmod "$mode" "$tmp"
  if [ -f "$f" ] && cmp -s "$tmp" "$f"; then
    rm -f "$tmp"
    return 1
  fi
  mv "$tmp" "$f"
  return 0
}

# fl_kubeconfig <file> <cert-name> <user> [context] [server]
fl_kubeconfig() {
  local f=$1 cert=$2 user=$3 ctx=${4:-$FL_CONTEXT} server=${5:-$FL_APISERVER_URL}
  fl_write_if_changed "$f" 0600 <<EOK || true
apiVersion: v1
kind: Config
clusters:
- name: faultlab
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$FL_PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$FL_PKI/$cert.crt")
    client-key-data: $(base64 -w0 <"$FL_PKI/$cert.key")
contexts:
- name: $ctx
  context:
    cluster: faultlab
    user: $user
current-context: $ctx
EOK
}
