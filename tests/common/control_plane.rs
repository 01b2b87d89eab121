//! A real etcd + kube-apiserver on loopback and the real `portcullis serve` process, for the
//! end-to-end tests (see E2E.md and `e2e/`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The `portcullis` binary under test.
pub const PORTCULLIS: &str = env!("CARGO_BIN_EXE_portcullis");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Writes a CA and a serving certificate for 127.0.0.1 and localhost into `dir` with
/// `portcullis certs` (`ca.crt`, `tls.crt`, `tls.key`).
pub fn write_serving_certs(dir: &Path) {
    let status = Command::new(PORTCULLIS)
        .args(["certs", "--out"])
        .arg(dir)
        .args(["--host", "127.0.0.1", "--host", "localhost"])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The folder with `etcd`, `kube-apiserver` and `kubectl` (`PORTCULLIS_E2E_BIN`); `None` skips
/// the test with a message, except under `CI=true`, where a missing folder fails it.
pub fn e2e_bin() -> Option<PathBuf> {
    match std::env::var_os("PORTCULLIS_E2E_BIN") {
        Some(dir) => Some(PathBuf::from(dir)),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but PORTCULLIS_E2E_BIN is not: run `make test` or `make e2e`")
        }
        None => {
            eprintln!(
                "SKIPPED end-to-end test: PORTCULLIS_E2E_BIN is not set (`make e2e` builds the \
                 control plane and sets it)"
            );
            None
        }
    }
}

/// The folder with the older control plane's `etcd`, `kube-apiserver` and `kubectl`
/// (`PORTCULLIS_E2E_BIN_OLD`: kube-apiserver v1.30, without MutatingAdmissionPolicy in-tree;
/// `e2e/build-controlplane.sh v1.30.14` builds it). `None` skips the older-apiserver tests with a
/// message, except under `CI=true`, where a missing folder fails them.
pub fn e2e_bin_old() -> Option<PathBuf> {
    match std::env::var_os("PORTCULLIS_E2E_BIN_OLD") {
        Some(dir) => Some(PathBuf::from(dir)),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but PORTCULLIS_E2E_BIN_OLD is not: run `make test` or `make e2e`")
        }
        None => {
            eprintln!(
                "SKIPPED end-to-end test on the older apiserver: PORTCULLIS_E2E_BIN_OLD is not set \
                 (`make e2e` builds both control planes and sets it)"
            );
            None
        }
    }
}

/// A running etcd + kube-apiserver; stopped (and its folder removed) on drop, panics included.
pub struct ControlPlane {
    pub env: HashMap<String, String>,
}

impl ControlPlane {
    pub fn start(bin: &Path) -> Self {
        Self::start_with(bin, &[])
    }

    /// [`ControlPlane::start`] with more kube-apiserver flags (an audit log, say).
    pub fn start_with(bin: &Path, apiserver_args: &[&str]) -> Self {
        // The in-tree PodSecurity plugin would refuse pods before any webhook is called;
        // Portcullis's Pod Security must be the one deciding here.
        let mut args = vec!["--disable-admission-plugins=ServiceAccount,PodSecurity"];
        args.extend_from_slice(apiserver_args);
        let output = Command::new(format!("{ROOT}/e2e/start-controlplane.sh"))
            .env("PORTCULLIS_E2E_BIN", bin)
            .env("PORTCULLIS_E2E_APISERVER_ARGS", args.join(" "))
            .stderr(Stdio::inherit())
            .output()
            .expect("run e2e/start-controlplane.sh");
        assert!(output.status.success(), "control plane did not start");
        let env = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        ControlPlane { env }
    }

    pub fn kubeconfig(&self) -> &str {
        &self.env["KUBECONFIG"]
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(&self.env["KUBECTL"])
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--request-timeout=30s")
            .args(args)
            .output()
            .expect("run kubectl")
    }

    /// `kubectl create --dry-run=server -n NAMESPACE -f FILE`.
    pub fn dry_run_create(&self, namespace: &str, file: &str) -> Output {
        self.kubectl(&["create", "-n", namespace, "--dry-run=server", "-f", file])
    }

    /// `kubectl create --dry-run=server -o json -n NAMESPACE` of `object`: the object as the
    /// apiserver would store it, or kubectl's stderr.
    pub fn dry_run_json(
        &self,
        namespace: &str,
        object: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let output = self.kubectl_stdin(
            &[
                "create",
                "-n",
                namespace,
                "--dry-run=server",
                "-o",
                "json",
                "-f",
                "-",
            ],
            &serde_json::to_string(object).unwrap(),
        );
        if !output.status.success() {
            return Err(stderr(&output));
        }
        serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())
    }

    /// The apiserver's `gitVersion`, e.g. `v1.37.2`.
    pub fn git_version(&self) -> String {
        let version: serde_json::Value =
            serde_json::from_str(&self.kubectl_ok(&["version", "-o", "json"])).unwrap();
        version["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The apiserver's `major.minor` as `/version` reports it, e.g. `1.30`.
    pub fn server_version(&self) -> String {
        let version: serde_json::Value =
            serde_json::from_str(&self.kubectl_ok(&["version", "-o", "json"])).unwrap();
        let server = &version["serverVersion"];
        format!(
            "{}.{}",
            server["major"].as_str().unwrap(),
            server["minor"].as_str().unwrap()
        )
    }

    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let output = self.kubectl(args);
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn apply(&self, manifest: &str) {
        let output = self.kubectl_stdin(&["apply", "-f", "-"], manifest);
        assert!(
            output.status.success(),
            "kubectl apply: {}",
            stderr(&output)
        );
    }

    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new(&self.env["KUBECTL"])
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--request-timeout=30s")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    pub async fn client(&self) -> kube::Client {
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        kube::Client::try_from(config).unwrap()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(dir) = self.env.get("E2E_DIR") {
            let _ = Command::new(format!("{ROOT}/e2e/stop-controlplane.sh"))
                .arg(dir)
                .status();
        }
    }
}

/// A `kube-controller-manager` running only some controllers against a [`ControlPlane`]
/// (which starts none: envtest's flag set). Killed on drop; its log stays in the control
/// plane's folder (`controller-manager.log`) until that is removed.
pub struct ControllerManager {
    child: Child,
    log: PathBuf,
}

impl ControlPlane {
    /// A copy of the admin kubeconfig, in `dir`, that impersonates ServiceAccount
    /// portcullis/portcullis, so Portcullis has only the RBAC granted to it.
    pub fn service_account_kubeconfig(&self, dir: &Path) -> String {
        let mut kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig()).unwrap();
        for user in &mut kubeconfig.auth_infos {
            if let Some(auth) = user.auth_info.as_mut() {
                auth.impersonate = Some("system:serviceaccount:portcullis:portcullis".into());
            }
        }
        let path = dir.join("service-account-kubeconfig");
        // JSON is YAML.
        std::fs::write(&path, serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
        path.display().to_string()
    }

    /// Starts `kube-controller-manager` from the control plane's bin folder with only
    /// `controllers` (names as `--controllers` takes them, e.g.
    /// `validatingadmissionpolicy-status-controller`), the admin kubeconfig, no leader election
    /// and no serving (`--secure-port=0`, so no port to pick and no authn/authz delegation).
    /// `-v=2` keeps the controllers' detail logs (the ValidatingAdmissionPolicy type checker
    /// logs schema resolution failures at that level).
    pub fn start_controller_manager(&self, controllers: &[&str]) -> ControllerManager {
        let binary = Path::new(&self.env["E2E_BIN_DIR"]).join("kube-controller-manager");
        assert!(
            binary.is_file(),
            "{} is missing: run e2e/build-controlplane.sh (it builds kube-controller-manager too)",
            binary.display()
        );
        let log = Path::new(&self.env["E2E_DIR"]).join("controller-manager.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(&binary)
            .arg(format!("--kubeconfig={}", self.kubeconfig()))
            .arg(format!("--controllers={}", controllers.join(",")))
            .args(["--leader-elect=false", "--secure-port=0", "-v=2"])
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        ControllerManager { child, log }
    }
}

impl ControllerManager {
    /// `Err` with the log's last lines when the process has exited.
    pub fn running(&mut self) -> Result<(), String> {
        match self.child.try_wait().unwrap() {
            None => Ok(()),
            Some(status) => Err(format!(
                "kube-controller-manager exited ({status}); last lines of {}:\n{}",
                self.log.display(),
                self.log_tail(40)
            )),
        }
    }

    /// The last `lines` lines of the log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `portcullis serve` process; killed on drop.
pub struct Portcullis {
    pub child: Child,
    pub webhook: SocketAddr,
    pub admin: SocketAddr,
}

impl Portcullis {
    /// `GET path` on the admin listener: the whole response when it is 200, else `Err` with it.
    pub fn admin_get(&self, path: &str) -> Result<String, String> {
        use std::io::{Read, Write};
        let mut tcp = std::net::TcpStream::connect(self.admin).map_err(|e| e.to_string())?;
        tcp.write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .map_err(|e| e.to_string())?;
        let mut text = String::new();
        tcp.read_to_string(&mut text).map_err(|e| e.to_string())?;
        if text.starts_with("HTTP/1.1 200") {
            Ok(text)
        } else {
            Err(text)
        }
    }

    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(PORTCULLIS)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .args(["--log-format", "json", "--shutdown-grace", "5s"])
            // SIGTERM's drain, shortened: the apiserver keeps being served during it.
            .args(["--drain-delay", "1s"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start portcullis");
        let stderr = child.stderr.take().unwrap();
        let (sender, addresses) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Ok(event) = serde_json::from_str::<serde_json::Value>(&line)
                    && event["message"] == "portcullis is serving"
                {
                    let address = |key: &str| event[key].as_str().unwrap().parse().unwrap();
                    let _ = sender.send((address("webhook"), address("admin")));
                }
                eprintln!("portcullis: {line}");
            }
        });
        let (webhook, admin) = addresses
            .recv_timeout(Duration::from_secs(30))
            .expect("portcullis reports its addresses");
        Portcullis {
            child,
            webhook,
            admin,
        }
    }

    pub fn metrics(&self) -> String {
        use std::io::{Read, Write};
        let mut tcp = std::net::TcpStream::connect(self.admin).unwrap();
        tcp.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        tcp.read_to_string(&mut text).unwrap();
        text
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "portcullis did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Portcullis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Retries `attempt` until it succeeds or `timeout` passes (configuration changes reach the
/// apiserver through an informer); the panic shows the last failure.
pub fn eventually(what: &str, timeout: Duration, mut attempt: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + timeout;
    loop {
        match attempt() {
            Ok(()) => return,
            Err(last) => assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; last: {last}"
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The object without what differs between two creates of it, whoever mutates it: the
/// server-set metadata and the status.
pub fn comparable(mut object: serde_json::Value) -> serde_json::Value {
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in [
            "uid",
            "creationTimestamp",
            "managedFields",
            "resourceVersion",
            "generation",
        ] {
            metadata.remove(field);
        }
    }
    if let Some(object) = object.as_object_mut() {
        object.remove("status");
    }
    object
}
