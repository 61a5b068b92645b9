//! GPG keys and detached signatures for provider releases, made by Debian's `gpg` in a
//! temporary home of their own (README's test command installs `gnupg`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

pub struct Gpg {
    home: tempfile::TempDir,
}

impl Default for Gpg {
    fn default() -> Self {
        Self::new()
    }
}

impl Gpg {
    pub fn new() -> Gpg {
        // A short path: gpg-agent's socket lives in it.
        let home = tempfile::Builder::new().prefix("gpg").tempdir_in("/tmp").expect("a temporary GNUPGHOME");
        Gpg { home }
    }

    fn command(&self) -> Command {
        let mut command = Command::new("gpg");
        command.arg("--homedir").arg(self.home.path()).args(["--batch", "--quiet", "--no-tty"]);
        command
    }

    /// Generates an RSA signing key for `uid` and returns its armored public key.
    pub fn generate(&self, uid: &str) -> String {
        self.generate_with(uid, "rsa2048", "sign")
    }

    /// Generates a key of `algorithm` (`rsa2048`, `ed25519`) for `uid`, for `usage` (`sign`,
    /// `cert`), and returns its armored public key.
    pub fn generate_with(&self, uid: &str, algorithm: &str, usage: &str) -> String {
        let unlocked = ["--passphrase", "", "--pinentry-mode", "loopback"];
        let made = self
            .command()
            .args(unlocked)
            .args(["--quick-gen-key", uid, algorithm, usage, "never"])
            .status()
            .expect("gpg runs (Debian's gnupg; README's test command installs it)");
        assert!(made.success(), "gpg generates a key for {uid}");
        self.export(uid)
    }

    /// A primary key that only certifies, with an RSA subkey that signs: gpg signs with the
    /// subkey. Returns the armored public key.
    pub fn generate_with_signing_subkey(&self, uid: &str) -> String {
        self.generate_with(uid, "rsa2048", "cert");
        let listed = self.command().args(["--with-colons", "--list-keys", uid]).output().expect("gpg lists");
        let listing = String::from_utf8(listed.stdout).expect("text");
        let fingerprint = listing
            .lines()
            .find_map(|line| line.strip_prefix("fpr:").map(|rest| rest.trim_matches(':').to_owned()))
            .expect("the primary key's fingerprint");
        let unlocked = ["--passphrase", "", "--pinentry-mode", "loopback"];
        let added = self
            .command()
            .args(unlocked)
            .args(["--quick-add-key", &fingerprint, "rsa2048", "sign", "never"])
            .status()
            .expect("gpg adds a subkey");
        assert!(added.success(), "gpg adds a signing subkey for {uid}");
        self.export(uid)
    }

    fn export(&self, uid: &str) -> String {
        let exported = self.command().args(["--armor", "--export", uid]).output().expect("gpg exports");
        assert!(exported.status.success() && !exported.stdout.is_empty(), "gpg exports {uid}");
        String::from_utf8(exported.stdout).expect("armor is text")
    }

    /// A binary detached signature of `data` by `uid`'s key, as `gpg --detach-sign` makes it.
    pub fn sign(&self, uid: &str, data: &[u8]) -> Vec<u8> {
        self.detach_sign(uid, data, &[])
    }

    /// The same, ASCII-armored (`--armor`), which Terraform cannot read.
    pub fn sign_armored(&self, uid: &str, data: &[u8]) -> Vec<u8> {
        self.detach_sign(uid, data, &["--armor"])
    }

    fn detach_sign(&self, uid: &str, data: &[u8], extra: &[&str]) -> Vec<u8> {
        let mut child = self
            .command()
            .args(extra)
            .args(["--local-user", uid, "--detach-sign", "--output", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("gpg signs");
        child.stdin.take().expect("stdin").write_all(data).expect("gpg reads the document");
        let signed = child.wait_with_output().expect("gpg signs");
        assert!(signed.status.success(), "gpg signs as {uid}");
        signed.stdout
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }
}

impl Drop for Gpg {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf").arg("--homedir").arg(self.home.path()).args(["--kill", "gpg-agent"]).status();
    }
}
