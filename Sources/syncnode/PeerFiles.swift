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
        var bytes = Array(data)
        while let last = bytes.last, last == 0x0A || last == 0x0D || last == 0x20 || last == 0x09 { bytes.removeLast() }
        guard bytes.count >= 16 else {
            throw Invalid(description: "\(what) in \(path) is \(bytes.count) bytes; use at least 16 (e.g. head -c 32 /dev/urandom | base64 > \(path))")
        }
        return bytes
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
