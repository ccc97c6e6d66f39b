use super::*;

fn tip(seq: u64) -> Anchor {
    Anchor {
        seq,
        hash: format!("{seq:064x}"),
    }
}

#[test]
fn processes_creating_the_key_file_at_once_all_end_up_with_the_one_key_written() {
    // Threads stand in for replicas starting together on one machine: each must read
    // the key whoever wrote it, never a file that is still being written.
    for round in 0..50 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/audit-signing.key");
        let barrier = std::sync::Barrier::new(8);
        let outcomes: Vec<_> = std::thread::scope(|scope| {
            let starts: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        CheckpointSigner::load_or_create(&path)
                    })
                })
                .collect();
            starts.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut created = 0;
        for outcome in &outcomes {
            let (signer, origin) = outcome
                .as_ref()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            created += usize::from(*origin == KeyOrigin::Created);
            assert_eq!(
                signer.public_key(),
                CheckpointSigner::from_file(&path).unwrap().public_key(),
                "round {round}: a process signs with a key that is not the file's"
            );
        }
        assert_eq!(created, 1, "round {round}");
        let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(leftovers, 1, "round {round}: temporary files left behind");
    }
}

#[test]
fn a_checkpoint_verifies_with_its_signers_public_key_and_no_other() {
    let signer = CheckpointSigner::generate();
    let checkpoint = signer.sign_checkpoint(&tip(7), "2026-01-01T00:00:00.000000Z");
    assert!(checkpoint.is_signed_by(&signer.trusted()));
    assert!(!checkpoint.is_signed_by(&CheckpointSigner::generate().trusted()));
    assert!(!checkpoint.is_signed_by(&TrustedKeys::default()));
    let moved = Checkpoint {
        seq: 6,
        ..checkpoint.clone()
    };
    assert!(!moved.is_signed_by(&signer.trusted()));
}

#[test]
fn the_signed_bytes_are_the_documented_text() {
    assert_eq!(
        checkpoint_message(3, "ab", "2026-01-01T00:00:00.000000Z"),
        "skillgate audit checkpoint v1\nseq 3\nhash ab\nat 2026-01-01T00:00:00.000000Z\n"
    );
    let range = PrunedRange {
        from_seq: 1,
        through_seq: 1000,
        anchor_hash: "cd".into(),
        events: 1000,
    };
    assert_eq!(
        prune_message(&range),
        "skillgate audit prune v1\nfrom_seq 1\nthrough_seq 1000\nanchor_hash cd\n"
    );
}

#[test]
fn a_public_key_round_trips_through_hex_and_garbage_is_refused() {
    let key = CheckpointSigner::generate().public_key();
    assert_eq!(key.to_string().parse::<PublicKey>().unwrap(), key);
    assert!("zz".parse::<PublicKey>().is_err());
    assert!("00".repeat(31).parse::<PublicKey>().is_err());
}

#[test]
fn the_signer_debug_output_shows_only_the_public_key() {
    let signer = CheckpointSigner::generate();
    let shown = format!("{signer:?}");
    assert!(shown.contains(&signer.public_key().to_string()), "{shown}");
    assert!(
        !shown.contains(&hex::encode(signer.key.to_bytes())),
        "{shown}"
    );
}

#[test]
fn a_key_file_is_created_once_owner_only_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys/audit-signing.key");
    let (first, origin) = CheckpointSigner::load_or_create(&path).unwrap();
    assert_eq!(origin, KeyOrigin::Created);
    let (again, origin) = CheckpointSigner::load_or_create(&path).unwrap();
    assert_eq!(origin, KeyOrigin::Loaded);
    assert_eq!(first.public_key(), again.public_key());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    std::fs::write(&path, "not a key").unwrap();
    assert!(matches!(
        CheckpointSigner::from_file(&path),
        Err(KeyError::Malformed { .. })
    ));
}

#[test]
fn the_default_key_sits_beside_the_database_file() {
    assert_eq!(
        default_key_path("sqlite://data/skillgate.db"),
        Some(PathBuf::from("data/audit-signing.key"))
    );
    assert_eq!(default_key_path("sqlite::memory:"), None);
}
