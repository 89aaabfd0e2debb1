import Configuration
import Synchronization

/// Records, for each setting `RunSettings.resolve` reads, the provider that gave it (the first
/// in precedence order holding a value). A setting no provider holds is not recorded: its
/// default applies.
final class SettingSources: AccessReporter, Sendable {
    private let found = Mutex<[SettingKey: String]>([:])

    func report(_ event: AccessEvent) {
        guard let key = SettingKey(rawValue: event.metadata.key.components.joined(separator: ".")),
              let source = event.providerResults.first(where: { (try? $0.result.get().value) != nil })?.providerName
        else { return }
        found.withLock { $0[key] = source }
    }

    /// Every setting recorded so far and its source.
    var bySetting: [SettingKey: String] { found.withLock { $0 } }
}
