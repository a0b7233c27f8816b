//! MQTT with Home Assistant discovery: the headline's power, lifetime energy and cost as
//! sensors, and low-power mode as a switch Home Assistant can command.
//!
//! Rules:
//! - Everything it publishes comes from the engine's published state ([`discovery`]); a command
//!   on the switch's topic is sent to the engine as every other change is, and shows in the
//!   state once the engine has applied it.
//! - Budget alerts (the day's or month's, and a key's soft threshold) go out once each, with the
//!   next state, on `PREFIX/alert`, not retained: an automation hears of each once.
//! - States go out at most once per interval, and at once when low-power mode changes. Nothing
//!   is queued while the broker is away: the energy is a counter, so the first state after a
//!   reconnect carries all of it.
//! - The energy never goes down: it is what the store committed
//!   ([`wattbar_engine::recorder::committed`]), which a crash cannot take back. Nothing read
//!   from the broker feeds it.
//! - Availability is retained: `online` after each connect, `offline` on a clean stop, and the
//!   same as the last will when the connection dies.
//! - A broker that refuses or cannot be reached is asked again after a backoff that doubles up
//!   to [`MAX_BACKOFF`]; each new reason is logged once. The password is never logged.
//! - What comes in is bounded: a message over [`MAX_INCOMING_BYTES`] (a command is `ON` or
//!   `OFF`) ends that connection, so one kept on the command topic would end every connection
//!   after it. Then commands over MQTT are off until the next start, said once with how to
//!   clear it, and states go on. A command that is neither `ON` nor `OFF` is said at most once a
//!   minute, with how many were left unsaid.

pub mod discovery;

use discovery::Topics;
use rumqttc::{
    AsyncClient, ConnectReturnCode, ConnectionError, Event, LastWill, MqttOptions, Packet, QoS,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use wattbar_engine::{Command, EngineReader, Error, PublishedState};

/// The default interval between states.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// The longest wait before asking a broker again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Home Assistant's default discovery prefix.
pub const DISCOVERY_PREFIX: &str = "homeassistant";
const KEEP_ALIVE: Duration = Duration::from_secs(30);
/// The most a message to Wattbar may be.
pub const MAX_INCOMING_BYTES: usize = 64 * 1024;
/// The most Wattbar sends at once (a discovery document is a few KiB).
const MAX_OUTGOING_BYTES: usize = 64 * 1024;
/// A wrong command is said at most this often.
const JUNK_SAID_EVERY: Duration = Duration::from_secs(60);

/// Where and how to publish.
#[derive(Clone, PartialEq)]
pub struct MqttConfig {
    pub host: String,
    pub port: u16,
    pub tls: bool,
    pub username: Option<String>,
    /// Read from a file of its own (mode 0600), never from a URL, never logged; sent only to
    /// the broker it was kept for.
    pub password: Option<wattbar_core::secret::Bound>,
    pub client_id: String,
    pub topics: Topics,
    /// The host name shown in Home Assistant's device.
    pub host_name: String,
    pub interval: Duration,
}

impl std::fmt::Debug for MqttConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttConfig")
            .field("broker", &self.broker())
            .field("username", &self.username)
            .field("password", &self.password)
            .field("client_id", &self.client_id)
            .field("topics", &self.topics)
            .field("interval", &self.interval)
            .finish()
    }
}

impl MqttConfig {
    /// The config for broker `url` (`mqtt://[user@]host[:port]` or `mqtts://…`), this machine
    /// being `host_name`. The topic prefix defaults to `wattbar/<host_name>`, the client id to
    /// `wattbar-<host_name>`.
    pub fn from_url(url: &str, host_name: &str) -> Result<MqttConfig, Error> {
        let bad = |why: &str| {
            Error::Invalid(wattbar_core::Error::Invalid {
                field: "mqtt",
                message: format!("{}: {why}", wattbar_outbound::shown(url)),
            })
        };
        let (tls, rest) = if let Some(r) = url.strip_prefix("mqtt://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("mqtts://") {
            (true, r)
        } else {
            return Err(bad("give mqtt://host[:port] or mqtts://host[:port]"));
        };
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') || rest.contains('?') {
            return Err(bad(
                "a broker's URL has no path; the topic prefix is set apart",
            ));
        }
        let (user, authority) = match rest.rsplit_once('@') {
            Some((user, a)) => (Some(user), a),
            None => (None, rest),
        };
        if user.is_some_and(|u| u.contains(':')) {
            return Err(bad(
                "a password in the URL would be seen in process lists and logs: put it in the \
                 password file (mode 0600) instead",
            ));
        }
        let authority: hyper::http::uri::Authority =
            authority.parse().map_err(|_| bad("not a host[:port]"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = authority
            .port_u16()
            .unwrap_or(if tls { 8883 } else { 1883 });
        let node = discovery::node_id(host_name);
        Ok(MqttConfig {
            host: host.to_string(),
            port,
            tls,
            username: user.filter(|u| !u.is_empty()).map(str::to_string),
            password: None,
            client_id: format!("wattbar-{node}"),
            topics: Topics::new(
                &format!("wattbar/{node}"),
                DISCOVERY_PREFIX,
                &format!("wattbar_{node}"),
            ),
            host_name: host_name.to_string(),
            interval: DEFAULT_INTERVAL,
        })
    }

    /// `mqtt://host:port`, for logs: no credentials.
    pub fn broker(&self) -> String {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        if self.host.contains(':') {
            format!("{scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }

    fn options(&self) -> Result<MqttOptions, String> {
        let mut o = MqttOptions::new(&self.client_id, &self.host, self.port);
        o.set_keep_alive(KEEP_ALIVE);
        o.set_max_packet_size(MAX_INCOMING_BYTES, MAX_OUTGOING_BYTES);
        o.set_clean_session(true);
        o.set_last_will(LastWill::new(
            self.topics.availability(),
            "offline",
            QoS::AtLeastOnce,
            true,
        ));
        if let Some(user) = &self.username {
            let password = self
                .password
                .as_ref()
                .and_then(|p| p.for_address(&self.broker()));
            o.set_credentials(user, password.unwrap_or_default());
        }
        if self.tls {
            #[cfg(not(target_os = "macos"))]
            let tls = rumqttc::TlsConfiguration::Rustls(
                wattbar_outbound::rustls_config().map_err(|e| e.to_string())?,
            );
            #[cfg(target_os = "macos")]
            let tls = rumqttc::TlsConfiguration::Native;
            o.set_transport(rumqttc::Transport::tls_with_config(tls));
        }
        Ok(o)
    }
}

/// The size of a message that ended the connection for being over [`MAX_INCOMING_BYTES`].
fn oversized(e: &ConnectionError) -> Option<usize> {
    match e {
        ConnectionError::MqttState(rumqttc::StateError::Deserialization(
            rumqttc::mqttbytes::Error::PayloadSizeLimitExceeded(bytes),
        )) => Some(*bytes),
        _ => None,
    }
}

/// Says something at most once per [`JUNK_SAID_EVERY`], counting what it left unsaid.
#[derive(Default)]
struct Quiet {
    said: Option<Instant>,
    unsaid: u64,
}

impl Quiet {
    fn say(&mut self, say: impl FnOnce(u64)) {
        let now = Instant::now();
        if self
            .said
            .is_some_and(|at| now.duration_since(at) < JUNK_SAID_EVERY)
        {
            self.unsaid += 1;
            return;
        }
        say(self.unsaid);
        self.said = Some(now);
        self.unsaid = 0;
    }
}

/// A command on `low_power/set`: `ON` or `OFF`, as Home Assistant's switch sends them. Anything
/// else is refused with what it was, its first 64 bytes escaped: a message that floods no log and
/// sends no control character to the terminal that shows it.
pub(crate) fn low_power_command(payload: &[u8]) -> Result<bool, String> {
    match payload {
        b"ON" => Ok(true),
        b"OFF" => Ok(false),
        other => Err(format!(
            "{:?} is neither ON nor OFF",
            String::from_utf8_lossy(&other[..other.len().min(64)])
        )),
    }
}

fn unsaid_text(unsaid: u64) -> String {
    match unsaid {
        0 => String::new(),
        n => format!(" ({n} more since the last said)"),
    }
}

/// Why a connection failed, for a person.
fn reason(e: &ConnectionError) -> String {
    match e {
        ConnectionError::ConnectionRefused(code) => match code {
            ConnectReturnCode::BadUserNamePassword => {
                "the broker refused the user name or password".to_string()
            }
            ConnectReturnCode::NotAuthorized => {
                "the broker refused: not authorized (check the user name and the password file)"
                    .to_string()
            }
            ConnectReturnCode::BadClientId => "the broker refused the client id".to_string(),
            other => format!("the broker refused the connection: {other:?}"),
        },
        ConnectionError::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

/// What the connection tells the publisher.
#[derive(Debug, Clone, PartialEq)]
enum Link {
    Down(Option<String>),
    /// Connected; the number counts connections, so each new one is seen.
    Up(u64),
}

/// Publishes the engine's state to the broker until `stop` completes; then says `offline` and
/// disconnects.
pub async fn run(
    config: MqttConfig,
    engine: EngineReader,
    stop: impl std::future::Future<Output = ()> + Send,
) {
    let options = match config.options() {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!("mqtt: {}: TLS cannot be set up: {e}", config.broker());
            return;
        }
    };
    let (client, mut eventloop) = AsyncClient::new(options, 32);
    let (link_tx, mut link) = watch::channel(Link::Down(None));
    let set_topic = config.topics.low_power_set();
    let broker = config.broker();
    let commands = engine.clone();
    let commands_off = Arc::new(AtomicBool::new(false));
    let refused = Arc::clone(&commands_off);
    let connection = tokio::spawn(async move {
        let mut backoff = Duration::from_secs(1);
        let mut connections = 0u64;
        let mut last_reason: Option<String> = None;
        let mut junk = Quiet::default();
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    connections += 1;
                    backoff = Duration::from_secs(1);
                    last_reason = None;
                    tracing::info!("mqtt: connected to {broker}");
                    let _ = link_tx.send(Link::Up(connections));
                }
                Ok(Event::Incoming(Packet::Publish(p))) if p.topic == set_topic => {
                    match low_power_command(p.payload.as_ref()) {
                        Ok(on) => {
                            if commands.send(Command::SetLowPower(on)).is_err() {
                                return;
                            }
                        }
                        Err(why) => junk.say(|unsaid| {
                            tracing::warn!(
                                "mqtt: {set_topic}: {why}; ignored{}",
                                unsaid_text(unsaid)
                            );
                        }),
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    if let Some(bytes) = oversized(&e) {
                        if !refused.swap(true, Ordering::SeqCst) {
                            tracing::warn!(
                                "mqtt: a message of {bytes} bytes came on {set_topic} (kept by \
                                 the broker, most likely), more than the {} KiB a command may \
                                 be: commands over MQTT are off until the next start, states go \
                                 on. Clear it with: mosquitto_pub -r -n -t {set_topic}",
                                MAX_INCOMING_BYTES / 1024
                            );
                        }
                        let _ = link_tx.send(Link::Down(None));
                        continue;
                    }
                    let why = reason(&e);
                    if last_reason.as_ref() != Some(&why) {
                        tracing::warn!(
                            "mqtt: {broker}: {why}; trying again in {} s, then less often",
                            backoff.as_secs()
                        );
                        last_reason = Some(why.clone());
                    }
                    let _ = link_tx.send(Link::Down(Some(why)));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    });

    let mut state = engine.subscribe();
    let mut publisher = Publisher {
        client: client.clone(),
        config,
        last_low_power: None,
        connected: false,
        commands_off,
        alerts_sent: 0,
    };
    let mut tick = tokio::time::interval(publisher.config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            changed = link.changed() => {
                if changed.is_err() {
                    break;
                }
                let now = link.borrow_and_update().clone();
                publisher.connected = matches!(now, Link::Up(_));
                if publisher.connected {
                    let p = state.borrow().clone();
                    publisher.announce(&p);
                    publisher.publish_state(&p);
                    tick.reset();
                }
            }
            changed = state.changed() => {
                if changed.is_err() {
                    break;
                }
                let p = state.borrow_and_update().clone();
                if publisher.last_low_power.is_some_and(|l| l != p.low_power.state.enabled) {
                    publisher.publish_state(&p);
                }
            }
            _ = tick.tick() => {
                let p = state.borrow().clone();
                publisher.publish_state(&p);
            }
        }
    }
    if publisher.connected {
        let _ = client.try_publish(
            publisher.config.topics.availability(),
            QoS::AtLeastOnce,
            true,
            "offline",
        );
        let _ = client.try_disconnect();
        // The connection task sends what was queued, then ends on the disconnect.
        let _ = tokio::time::timeout(Duration::from_secs(2), connection).await;
    } else {
        connection.abort();
    }
}

struct Publisher {
    client: AsyncClient,
    config: MqttConfig,
    /// Low-power mode in the last state sent.
    last_low_power: Option<bool>,
    connected: bool,
    /// A message too large for a command was kept on the command topic: not subscribed.
    commands_off: Arc<AtomicBool>,
    /// The engine's `alert_seq` of the last alerts sent.
    alerts_sent: u64,
}

impl Publisher {
    /// After each connect: discovery, availability and the subscription to commands; the first
    /// state follows it.
    fn announce(&mut self, p: &Arc<PublishedState>) {
        let topics = self.config.topics.clone();
        let version = env!("CARGO_PKG_VERSION");
        for (topic, doc) in discovery::documents(
            &topics,
            &self.config.host_name,
            p.energy.session.currency.as_str(),
            version,
        ) {
            self.send(topic, true, doc.to_string());
        }
        self.send(topics.availability(), true, "online".to_string());
        let topic = topics.low_power_set();
        if self.commands_off.load(Ordering::SeqCst) {
            return;
        }
        if let Err(e) = self.client.try_subscribe(&topic, QoS::AtLeastOnce) {
            tracing::warn!("mqtt: cannot subscribe to {topic}: {e}");
        }
    }

    fn publish_state(&mut self, p: &Arc<PublishedState>) {
        if !self.connected {
            return;
        }
        self.last_low_power = Some(p.low_power.state.enabled);
        let topics = self.config.topics.clone();
        let state = discovery::state(p);
        self.send(
            topics.attributes(),
            true,
            discovery::attributes(p).to_string(),
        );
        self.send(topics.state(), true, state.to_string());
        if p.kept.alert_seq > self.alerts_sent {
            self.alerts_sent = p.kept.alert_seq;
            let alerts = serde_json::json!({ "alerts": p.kept.alerts });
            self.send(topics.alert(), false, alerts.to_string());
        }
    }

    /// Queued for the connection; dropped when the queue is full (the broker is slow): the
    /// next state carries everything.
    fn send(&self, topic: String, retain: bool, payload: String) {
        if let Err(e) = self
            .client
            .try_publish(topic, QoS::AtLeastOnce, retain, payload)
        {
            tracing::debug!("mqtt: not sent: {e}");
        }
    }
}

#[cfg(test)]
mod tests;
