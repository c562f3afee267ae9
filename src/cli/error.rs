//! The error every command can end with: the union of the library's errors.

/// Any error a command can end with; each adapter's own error keeps its structure up to here
/// (boxed: errors are rare, results are everywhere).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(super) struct Error(Box<ErrorKind>);

impl<E: Into<ErrorKind>> From<E> for Error {
    fn from(err: E) -> Self {
        Error(Box::new(err.into()))
    }
}

#[derive(Debug, thiserror::Error)]
pub(super) enum ErrorKind {
    #[error(transparent)]
    Core(#[from] crate::error::Error),
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    #[error(transparent)]
    Ci(#[from] crate::ci::CiError),
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    #[error(transparent)]
    Delta(#[from] crate::delta::DeltaError),
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    #[error(transparent)]
    Lineage(#[from] crate::lineage::LineageError),
    #[error(transparent)]
    Signing(#[from] crate::signing::SigningError),
    /// An error that named an argument by the file its bytes were read from (an LFS object
    /// inside `.git`, a temporary copy of a blob), shown with the argument as it was typed;
    /// the error itself is kept as the source.
    #[error("{shown}")]
    Renamed {
        shown: String,
        #[source]
        source: Error,
    },
}

impl Error {
    /// A delta error shown in full (`--all`): every difference of a delta from its base.
    pub(super) fn in_full(self) -> Error {
        let full = match &*self.0 {
            ErrorKind::Delta(e) => e.every_difference(),
            _ => None,
        };
        match full {
            Some(shown) => ErrorKind::Renamed {
                shown,
                source: self,
            }
            .into(),
            None => self,
        }
    }

    /// The error with each file of `files` named by the argument it was opened for.
    pub(super) fn naming(self, files: &[(&std::path::Path, &str)]) -> Error {
        let message = self.to_string();
        let mut shown = message.clone();
        // A path that is the argument itself needs no renaming (and a short one must not
        // rename every place its text appears).
        for (path, typed) in files.iter().filter(|(p, t)| p.as_os_str() != *t) {
            let typed = crate::escape::shown(typed);
            shown = shown.replace(&crate::escape::shown_path(path).to_string(), &typed);
            shown = shown.replace(&path.display().to_string(), &typed);
        }
        if shown == message {
            return self;
        }
        ErrorKind::Renamed {
            shown,
            source: self,
        }
        .into()
    }
}

pub(super) type Result<T, E = Error> = std::result::Result<T, E>;
