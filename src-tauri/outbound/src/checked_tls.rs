//! The TLS of the addresses that may pin their certificate ([`wattbar_core::pin`]): rustls with the
//! system's roots, or with the pinned certificate alone, and a refusal that names the
//! fingerprint it saw. A connector of ureq's, in place of its own TLS.

use crate::Error;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use std::io::{Read, Write};
use std::sync::Arc;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
    TransportAdapter,
};
use wattbar_core::pin::Pin;

/// Checks a server's certificate: the pinned one alone, else the system's roots.
#[derive(Debug)]
struct Checked {
    pin: Option<Pin>,
    /// `None` where the system's roots could not be read: only a pin is trusted then.
    roots: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Checked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = Pin::of(end_entity.as_ref());
        if let Some(pin) = self.pin {
            return if seen == pin {
                Ok(ServerCertVerified::assertion())
            } else {
                Err(rustls::Error::General(format!(
                    "the certificate's SHA-256 fingerprint is {seen}, not the pinned {pin}"
                )))
            };
        }
        let Some(roots) = &self.roots else {
            return Err(rustls::Error::General(format!(
                "no trusted root certificates to check it against; its SHA-256 fingerprint is \
                 {seen}: pin it (tls_pin_sha256) to trust this one certificate"
            )));
        };
        roots
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            .map_err(|e| {
                rustls::Error::General(format!(
                    "{e}; its SHA-256 fingerprint is {seen}: if that is the server's own \
                     certificate, pin it (tls_pin_sha256) to trust this one certificate"
                ))
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// ureq's connector for https through [`Checked`]; plain http passes through.
#[derive(Debug)]
pub struct CheckedTls {
    config: Arc<ClientConfig>,
}

impl CheckedTls {
    /// Trusting `pin` alone, or the system's roots without one.
    pub fn new(pin: Option<Pin>) -> Result<CheckedTls, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match crate::root_store() {
            Ok(store) => Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
                    .build()
                    .map_err(|e| Error::NoRoots(e.to_string()))?,
            ),
            Err(_) if pin.is_some() => None,
            Err(e) => return Err(e),
        };
        let verifier = Arc::new(Checked {
            pin,
            roots,
            provider: provider.clone(),
        });
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::NoRoots(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(CheckedTls {
            config: Arc::new(config),
        })
    }
}

impl<In: Transport> Connector<In> for CheckedTls {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Ok(None);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details
            .uri
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let name = ServerName::try_from(host)
            .map_err(|_| ureq::Error::Tls("the address's host is not a name for TLS"))?;
        let mut conn = ClientConnection::new(self.config.clone(), name)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(TlsTransport {
            buffers,
            stream: StreamOwned { conn, sock },
        })))
    }
}

/// One TLS connection over the transport below it.
pub struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsTransport")
            .field("chained", &self.stream.sock.inner())
            .finish()
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = self.buffers.output().get(..amount).unwrap_or_default();
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}
