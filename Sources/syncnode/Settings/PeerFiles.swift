import Foundation

/// The files a peer reads at start: its cluster secret and its data directory.
enum PeerFiles {
    /// Why a file cannot be used; the text says what to do.
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// The secret in `path`: its bytes without trailing whitespace, at least 16 of them. The
    /// file must not be readable by group or others (like an ssh key): `chmod 600 FILE`.
    /// `what` names the secret in the errors ("cluster secret", "admin password").
    static func readSecret(_ path: String, what: String = "cluster secret") throws(Invalid) -> [UInt8] {
        var bytes = try readPrivateFile(path, what: what)
        while let last = bytes.last, last == 0x0A || last == 0x0D || last == 0x20 || last == 0x09 { bytes.removeLast() }
        guard bytes.count >= 16 else {
            throw Invalid(description: "\(what) in \(path) is \(bytes.count) bytes; use at least 16 (e.g. head -c 32 /dev/urandom | base64 > \(path))")
        }
        return bytes
    }

    /// The bytes of a file only its owner may read (mode 600 or stricter), or why not.
    private static func readPrivateFile(_ path: String, what: String) throws(Invalid) -> [UInt8] {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw Invalid(description: "cannot read the \(what) file \(path): \(error.localizedDescription)")
        }
        if let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 {
            throw Invalid(description: "\(what) file \(path) is readable by others (mode \(String(mode, radix: 8))): run chmod 600 \(path)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Invalid(description: "cannot read the \(what) file \(path)")
        }
        return Array(data)
    }

    /// The secrets a peer with `settings` accepts, the cluster secret first (it proves and seals
    /// with it): empty without a cluster secret file. Accepted secrets need one.
    static func readKeyring(_ settings: RunSettings) throws(Invalid) -> [[UInt8]] {
        guard let path = settings.clusterSecretFile else {
            if settings.acceptedSecretsFile != nil {
                throw Invalid(description: "an accepted secrets file needs a cluster secret file (--cluster-secret-file)")
            }
            return []
        }
        let primary = try readSecret(path)
        var keyring = [primary]
        if let list = settings.acceptedSecretsFile {
            for secret in try readSecretList(list) where !keyring.contains(secret) { keyring.append(secret) }
        }
        guard keyring.count <= 8 else {
            throw Invalid(description: "\(keyring.count) cluster secrets: accept at most 8 at once (retire old ones)")
        }
        return keyring
    }

    /// The secrets in a file of one per line (mode 600; blank lines and surrounding spaces
    /// ignored; each at least 16 bytes). An empty file accepts nothing more.
    static func readSecretList(_ path: String) throws(Invalid) -> [[UInt8]] {
        let bytes = try readPrivateFile(path, what: "accepted secrets")
        var secrets: [[UInt8]] = []
        for (number, line) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            var secret = Array(line)
            while let last = secret.last, last == 0x0D || last == 0x20 || last == 0x09 { secret.removeLast() }
            while let first = secret.first, first == 0x20 || first == 0x09 { secret.removeFirst() }
            if secret.isEmpty { continue }
            guard secret.count >= 16 else {
                throw Invalid(description: "accepted secret on line \(number + 1) of \(path) is \(secret.count) bytes; use at least 16")
            }
            secrets.append(secret)
        }
        return secrets
    }

    /// Makes `directory` (mode 700) if needed and settles the node id: the `node-id` file in it
    /// wins when `id` is nil; a file naming another id than `id` is refused (one data directory
    /// belongs to one node). Returns the id.
    static func prepareDataDirectory(_ directory: String, id: String?) throws(Invalid) -> String {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw Invalid(description: "cannot create the data directory \(directory): \(error.localizedDescription)")
        }
        let idFile = (directory as NSString).appendingPathComponent("node-id")
        if let data = FileManager.default.contents(atPath: idFile) {
            let stored = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if let id, id != stored {
                throw Invalid(description: "data directory \(directory) belongs to node '\(stored)', not '\(id)': use --id \(stored) or another --data-dir")
            }
            return stored
        }
        guard let id else { throw Invalid(description: "no --id given and \(idFile) does not exist") }
        do {
            try Data((id + "\n").utf8).write(to: URL(fileURLWithPath: idFile), options: .atomic)
        } catch {
            throw Invalid(description: "cannot write \(idFile): \(error.localizedDescription)")
        }
        return id
    }
}
